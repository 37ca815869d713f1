//! Flame graph trees from folded stacks ([`super::Profile::folded`], what `kstate profile
//! --flame` draws): one profile's, or two side by side for a differential flame graph
//! (each frame with A's samples and B's, matched by the same call path from the root).
//! A tree is cut to the frames a chart can show: those with at least a given share of
//! either side's samples, their cut children summed into `[other]`.

use std::collections::BTreeMap;

use kstate_format::{sections, Trace};

/// One frame: its name, samples in A and B (B is 0 for one profile), its callees.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Frame {
    pub name: String,
    pub samples: [u64; 2],
    pub children: Vec<Frame>,
}

/// Whether the recording has CPU samples (`kstate record --sample`, or a perf.data).
pub fn has_samples(trace: &Trace) -> bool {
    trace.extra(sections::ids::SAMPLES).is_some() || trace.perf.is_some()
}

#[derive(Default)]
struct Node {
    samples: [u64; 2],
    children: BTreeMap<String, Node>,
}

impl Node {
    fn add(&mut self, stack: &str, n: u64, side: usize) {
        self.samples[side] += n;
        let mut node = self;
        for f in stack.split(';').filter(|f| !f.is_empty()) {
            node = node.children.entry(f.to_string()).or_default();
            node.samples[side] += n;
        }
    }

    /// The frame, children with at least `min` samples on either side (largest first);
    /// the rest summed into `[other]`.
    fn frame(self, name: String, min: [u64; 2]) -> Frame {
        let mut children = Vec::new();
        let mut other = [0u64; 2];
        for (n, c) in self.children {
            if c.samples[0] >= min[0].max(1) || c.samples[1] >= min[1].max(1) {
                children.push(c.frame(n, min));
            } else {
                other[0] += c.samples[0];
                other[1] += c.samples[1];
            }
        }
        children.sort_by(|x, y| {
            (y.samples[0] + y.samples[1])
                .cmp(&(x.samples[0] + x.samples[1]))
                .then_with(|| x.name.cmp(&y.name))
        });
        if other != [0, 0] {
            children.push(Frame {
                name: "[other]".into(),
                samples: other,
                children: Vec::new(),
            });
        }
        Frame {
            name,
            samples: self.samples,
            children,
        }
    }
}

/// The tree of one profile's stacks (root `all`); frames under `min_share` of the samples
/// summed into `[other]`.
pub fn tree(folded: &[(String, u64)], min_share: f64) -> Frame {
    diff_tree(folded, &[], min_share)
}

/// A's and B's stacks in one tree: each frame with both sides' samples.
pub fn diff_tree(a: &[(String, u64)], b: &[(String, u64)], min_share: f64) -> Frame {
    let mut root = Node::default();
    for (s, n) in a {
        root.add(s, *n, 0);
    }
    for (s, n) in b {
        root.add(s, *n, 1);
    }
    let min = [
        (root.samples[0] as f64 * min_share).ceil() as u64,
        (root.samples[1] as f64 * min_share).ceil() as u64,
    ];
    // A side without samples does not keep frames alive.
    let min = [
        if root.samples[0] == 0 {
            u64::MAX
        } else {
            min[0]
        },
        if root.samples[1] == 0 {
            u64::MAX
        } else {
            min[1]
        },
    ];
    root.frame("all".into(), min)
}

impl Frame {
    /// Frames in the tree.
    pub fn len(&self) -> usize {
        1 + self.children.iter().map(Frame::len).sum::<usize>()
    }

    pub fn is_empty(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(s: &str, n: u64) -> (String, u64) {
        (s.to_string(), n)
    }

    #[test]
    fn trees_and_differences() {
        let a = [
            f("main;work;memcpy", 60),
            f("main;work", 30),
            f("main;idle", 10),
        ];
        let b = [
            f("main;work;memcpy", 20),
            f("main;work", 30),
            f("main;fsync", 50),
        ];
        let t = tree(&a, 0.0);
        assert_eq!(t.samples, [100, 0]);
        let main = &t.children[0];
        assert_eq!((main.name.as_str(), main.samples[0]), ("main", 100));
        assert_eq!(main.children[0].name, "work");
        assert_eq!(main.children[0].samples[0], 90);
        let d = diff_tree(&a, &b, 0.0);
        let main = &d.children[0];
        let by = |n: &str| main.children.iter().find(|c| c.name == n).unwrap();
        assert_eq!(by("work").samples, [90, 50]);
        assert_eq!(by("fsync").samples, [0, 50]);
        assert_eq!(by("idle").samples, [10, 0]);
        // Cut at 15 %: idle (10 % of A, none of B) goes to [other].
        let cut = diff_tree(&a, &b, 0.15);
        let names: Vec<&str> = cut.children[0]
            .children
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(names, ["work", "fsync", "[other]"]);
        assert_eq!(cut.children[0].children[2].samples, [10, 0]);
    }
}
