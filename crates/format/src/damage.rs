//! Damage met while reading a trace, as results carry it: each problem once, as the
//! reader's error ([`Error`]: its kind, file, CPU, offset and words), so
//! that every front end prints what was skipped beside what was read, and says the
//! input was bad however much of it could be read.

use crate::sections;
use crate::stream::merge::{IdFilter, Merger};
use crate::{Error, Trace};

/// Adds `e` to `list` unless the same problem at the same place is there already
/// (several passes over one file meet the same damage).
pub fn note(list: &mut Vec<Error>, e: &Error) {
    if !list.iter().any(|x| x.same_place(e)) {
        list.push(e.clone());
    }
}

/// A damaged kstate section `id` of `trace`, decoded without success (`e`): its
/// offsets are into the section's payload, not the file, so they are said in words.
pub fn in_section(trace: &Trace, id: u16, e: Error) -> Error {
    let len = trace.extra(id).map_or(0, <[u8]>::len);
    let at = e
        .offset
        .map(|o| format!(", byte {o} of its {len} bytes"))
        .unwrap_or_default();
    let name = sections::section_name(id).unwrap_or("unknown");
    let msg = e
        .msg
        .strip_prefix(&format!("{name} section: "))
        .unwrap_or(&e.msg);
    Error::new(
        e.kind,
        None,
        format!("kstate {name} section (option {id:#x}){at}: {msg}"),
    )
    .in_file(&trace.path)
}

/// What is damaged in `trace`, read through once: the file's own damage and each CPU
/// stream's (a page that does not decode, records whose id has no event format), each
/// once. For commands that copy pages without decoding them (`convert`, `split`): what
/// the input lacks, the copy lacks too, and they must say so.
pub fn scan(trace: &Trace) -> Vec<Error> {
    let mut damage = Vec::new();
    for e in trace.damage() {
        note(&mut damage, e);
    }
    let mut m = match Merger::new(trace, None, IdFilter::all()) {
        Ok(m) => m,
        Err(e) => {
            note(&mut damage, &e);
            return damage;
        }
    };
    loop {
        match m.next() {
            Ok(Some(ev)) => {
                let id = ev.id;
                if trace.events.get(id).is_none() {
                    m.count_no_format(id);
                }
            }
            Ok(None) => break,
            Err(e) => note(&mut damage, &e),
        }
    }
    for e in m.no_format_errors() {
        note(&mut damage, &e);
    }
    damage
}
