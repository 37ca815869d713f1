//! Where a function without CFI that keeps a frame pointer (hand-written assembly in a
//! file that has CFI) was interrupted: a frame-pointer step is only right once the
//! function has pushed the caller's frame pointer and pointed %rbp at it, and until it
//! pops it again. At its first instruction and at its `ret`, %rbp is still (or again)
//! the caller's, which in code built without frame pointers is any value: a step
//! through it named no caller, or a wrong one (2 of 1,240 samples of such a function
//! were taken at its `ret`, in one run of four). So the sampled instruction is read from
//! the file and the step made as the function's state says.

use std::os::unix::fs::FileExt;

use framehop::x86_64::UnwindRegsX86_64;

/// How far a function had set up its frame at the sampled instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    /// Nothing pushed: at the function's `push %rbp` (or the `endbr64` before it), or
    /// at its `ret` after `pop %rbp`/`leave`. The return address is at %rsp.
    NoFrame,
    /// `push %rbp` done, `mov %rsp,%rbp` not yet: the caller's %rbp at %rsp, the
    /// return address above it.
    Pushed,
    /// The frame is set up (or the instruction is not one of the above).
    Body,
}

/// The code of a file, read at a sampled instruction.
pub(crate) struct Code {
    path: String,
    /// PT_LOAD segments: (file offset, file size, virtual address, memory size).
    segments: Vec<(u64, u64, u64, u64)>,
}

impl Code {
    pub(crate) fn new(path: &str, segments: Vec<(u64, u64, u64, u64)>) -> Code {
        Code {
            path: path.to_string(),
            segments,
        }
    }

    /// The stage of the instruction at `svma`; Body where the file cannot be read there.
    pub(crate) fn stage(&self, svma: u64) -> Stage {
        let Some(off) = self
            .segments
            .iter()
            .find(|&&(_, size, vaddr, _)| svma >= vaddr && svma - vaddr < size)
            .map(|&(o, _, vaddr, _)| o + (svma - vaddr))
        else {
            return Stage::Body;
        };
        let mut b = [0u8; 4];
        let n = std::fs::File::open(&self.path)
            .and_then(|f| f.read_at(&mut b, off))
            .unwrap_or(0);
        stage(&b[..n])
    }
}

/// The stage of the instruction whose first bytes are `code`.
fn stage(code: &[u8]) -> Stage {
    match code {
        // push %rbp; endbr64; ret; rep ret
        [0x55, ..] | [0xf3, 0x0f, 0x1e, 0xfa, ..] | [0xc3, ..] | [0xf3, 0xc3, ..] => Stage::NoFrame,
        // mov %rsp,%rbp (both encodings)
        [0x48, 0x89, 0xe5, ..] | [0x48, 0x8b, 0xec, ..] => Stage::Pushed,
        _ => Stage::Body,
    }
}

/// One step out of a function at `stage` other than [`Stage::Body`]: the return address.
pub(crate) fn step(
    stage: Stage,
    regs: &mut UnwindRegsX86_64,
    read: &mut impl FnMut(u64) -> Result<u64, ()>,
) -> Result<u64, ()> {
    let sp = regs.sp();
    let ra_at = match stage {
        Stage::Pushed => {
            regs.set_bp(read(sp)?);
            sp.checked_add(8).ok_or(())?
        }
        _ => sp,
    };
    let ra = read(ra_at)?;
    regs.set_sp(ra_at.checked_add(8).ok_or(())?);
    regs.set_ip(ra);
    Ok(ra)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instructions_say_the_stage() {
        assert_eq!(stage(&[0x55, 0x48, 0x89, 0xe5]), Stage::NoFrame);
        assert_eq!(stage(&[0xf3, 0x0f, 0x1e, 0xfa]), Stage::NoFrame);
        assert_eq!(stage(&[0xc3, 0, 0, 0]), Stage::NoFrame);
        assert_eq!(stage(&[0xf3, 0xc3]), Stage::NoFrame);
        assert_eq!(stage(&[0x48, 0x89, 0xe5, 0x48]), Stage::Pushed);
        // mov %rdi,%rax; pop %rbp; nothing read
        assert_eq!(stage(&[0x48, 0x89, 0xf8]), Stage::Body);
        assert_eq!(stage(&[0x5d, 0xc3]), Stage::Body);
        assert_eq!(stage(&[]), Stage::Body);
    }

    #[test]
    fn steps_take_the_return_address_where_the_stage_has_it() {
        // A stack at 0x8000: [0x8000] = 0x7777 (a pushed %rbp), [0x8008] = 0x401234.
        let mut read = |a: u64| match a {
            0x8000 => Ok(0x7777),
            0x8008 => Ok(0x401234),
            _ => Err(()),
        };
        let mut r = UnwindRegsX86_64::new(0x1000, 0x8000, 0x5555);
        assert_eq!(step(Stage::NoFrame, &mut r, &mut read), Ok(0x7777));
        assert_eq!((r.sp(), r.bp()), (0x8008, 0x5555));
        let mut r = UnwindRegsX86_64::new(0x1000, 0x8000, 0x5555);
        assert_eq!(step(Stage::Pushed, &mut r, &mut read), Ok(0x401234));
        assert_eq!((r.sp(), r.bp()), (0x8010, 0x7777));
    }
}
