//! libtraceevent's plugin_kvm, as trace-cmd loads it: `kvm_exit`, `kvm_entry`,
//! `kvm_emulate_insn`, `kvm_nested_vmexit(_inject)` and the kvmmmu page events print the
//! plugin's text, not the kernel's print fmt. Exit reasons come from the plugin's own VMX and
//! SVM tables (chosen by the event's `isa`), instructions as hex bytes (Debian builds the
//! plugin without a disassembler), and a kvmmmu page role from the plugin's (old) layout of
//! `union kvm_mmu_page_role`.

use crate::bytes::Endian;
use crate::event_format::EventFormat;
use crate::print_fmt::cfmt;
use crate::print_fmt::plugins::{get_field, handled, own_field, print_num_field, Printed};

/// VMX exit reasons (the plugin's `VMX_EXIT_REASONS`).
const VMX: &[(i32, &str)] = &[
    (0, "EXCEPTION_NMI"),
    (1, "EXTERNAL_INTERRUPT"),
    (2, "TRIPLE_FAULT"),
    (7, "PENDING_INTERRUPT"),
    (8, "NMI_WINDOW"),
    (9, "TASK_SWITCH"),
    (10, "CPUID"),
    (12, "HLT"),
    (13, "INVD"),
    (14, "INVLPG"),
    (15, "RDPMC"),
    (16, "RDTSC"),
    (18, "VMCALL"),
    (19, "VMCLEAR"),
    (20, "VMLAUNCH"),
    (21, "VMPTRLD"),
    (22, "VMPTRST"),
    (23, "VMREAD"),
    (24, "VMRESUME"),
    (25, "VMWRITE"),
    (26, "VMOFF"),
    (27, "VMON"),
    (28, "CR_ACCESS"),
    (29, "DR_ACCESS"),
    (30, "IO_INSTRUCTION"),
    (31, "MSR_READ"),
    (32, "MSR_WRITE"),
    (36, "MWAIT_INSTRUCTION"),
    (39, "MONITOR_INSTRUCTION"),
    (40, "PAUSE_INSTRUCTION"),
    (41, "MCE_DURING_VMENTRY"),
    (43, "TPR_BELOW_THRESHOLD"),
    (44, "APIC_ACCESS"),
    (45, "EOI_INDUCED"),
    (48, "EPT_VIOLATION"),
    (49, "EPT_MISCONFIG"),
    (50, "INVEPT"),
    (52, "PREEMPTION_TIMER"),
    (54, "WBINVD"),
    (55, "XSETBV"),
    (56, "APIC_WRITE"),
    (58, "INVPCID"),
    (62, "PML_FULL"),
    (63, "XSAVES"),
    (64, "XRSTORS"),
];

/// SVM exit codes (the plugin's `SVM_EXIT_REASONS`).
const SVM: &[(i32, &str)] = &[
    (0x000, "EXIT_READ_CR0"),
    (0x003, "EXIT_READ_CR3"),
    (0x004, "EXIT_READ_CR4"),
    (0x008, "EXIT_READ_CR8"),
    (0x010, "EXIT_WRITE_CR0"),
    (0x013, "EXIT_WRITE_CR3"),
    (0x014, "EXIT_WRITE_CR4"),
    (0x018, "EXIT_WRITE_CR8"),
    (0x020, "EXIT_READ_DR0"),
    (0x021, "EXIT_READ_DR1"),
    (0x022, "EXIT_READ_DR2"),
    (0x023, "EXIT_READ_DR3"),
    (0x024, "EXIT_READ_DR4"),
    (0x025, "EXIT_READ_DR5"),
    (0x026, "EXIT_READ_DR6"),
    (0x027, "EXIT_READ_DR7"),
    (0x030, "EXIT_WRITE_DR0"),
    (0x031, "EXIT_WRITE_DR1"),
    (0x032, "EXIT_WRITE_DR2"),
    (0x033, "EXIT_WRITE_DR3"),
    (0x034, "EXIT_WRITE_DR4"),
    (0x035, "EXIT_WRITE_DR5"),
    (0x036, "EXIT_WRITE_DR6"),
    (0x037, "EXIT_WRITE_DR7"),
    (0x040, "EXIT_EXCP_DE"),
    (0x041, "EXIT_EXCP_DB"),
    (0x043, "EXIT_EXCP_BP"),
    (0x044, "EXIT_EXCP_OF"),
    (0x045, "EXIT_EXCP_BR"),
    (0x046, "EXIT_EXCP_UD"),
    (0x047, "EXIT_EXCP_NM"),
    (0x048, "EXIT_EXCP_DF"),
    (0x04a, "EXIT_EXCP_TS"),
    (0x04b, "EXIT_EXCP_NP"),
    (0x04c, "EXIT_EXCP_SS"),
    (0x04d, "EXIT_EXCP_GP"),
    (0x04e, "EXIT_EXCP_PF"),
    (0x050, "EXIT_EXCP_MF"),
    (0x051, "EXIT_EXCP_AC"),
    (0x052, "EXIT_EXCP_MC"),
    (0x053, "EXIT_EXCP_XF"),
    (0x060, "EXIT_INTR"),
    (0x061, "EXIT_NMI"),
    (0x062, "EXIT_SMI"),
    (0x063, "EXIT_INIT"),
    (0x064, "EXIT_VINTR"),
    (0x065, "EXIT_CR0_SEL_WRITE"),
    (0x066, "EXIT_IDTR_READ"),
    (0x067, "EXIT_GDTR_READ"),
    (0x068, "EXIT_LDTR_READ"),
    (0x069, "EXIT_TR_READ"),
    (0x06a, "EXIT_IDTR_WRITE"),
    (0x06b, "EXIT_GDTR_WRITE"),
    (0x06c, "EXIT_LDTR_WRITE"),
    (0x06d, "EXIT_TR_WRITE"),
    (0x06e, "EXIT_RDTSC"),
    (0x06f, "EXIT_RDPMC"),
    (0x070, "EXIT_PUSHF"),
    (0x071, "EXIT_POPF"),
    (0x072, "EXIT_CPUID"),
    (0x073, "EXIT_RSM"),
    (0x074, "EXIT_IRET"),
    (0x075, "EXIT_SWINT"),
    (0x076, "EXIT_INVD"),
    (0x077, "EXIT_PAUSE"),
    (0x078, "EXIT_HLT"),
    (0x079, "EXIT_INVLPG"),
    (0x07a, "EXIT_INVLPGA"),
    (0x07b, "EXIT_IOIO"),
    (0x07c, "EXIT_MSR"),
    (0x07d, "EXIT_TASK_SWITCH"),
    (0x07e, "EXIT_FERR_FREEZE"),
    (0x07f, "EXIT_SHUTDOWN"),
    (0x080, "EXIT_VMRUN"),
    (0x081, "EXIT_VMMCALL"),
    (0x082, "EXIT_VMLOAD"),
    (0x083, "EXIT_VMSAVE"),
    (0x084, "EXIT_STGI"),
    (0x085, "EXIT_CLGI"),
    (0x086, "EXIT_SKINIT"),
    (0x087, "EXIT_RDTSCP"),
    (0x088, "EXIT_ICEBP"),
    (0x089, "EXIT_WBINVD"),
    (0x08a, "EXIT_MONITOR"),
    (0x08b, "EXIT_MWAIT"),
    (0x08c, "EXIT_MWAIT_COND"),
    (0x08d, "EXIT_XSETBV"),
    (0x400, "EXIT_NPF"),
    (0x401, "EXIT_AVIC_INCOMPLETE_IPI"),
    (0x402, "EXIT_AVIC_UNACCELERATED_ACCESS"),
    (-1, "EXIT_ERR"),
];

/// `print_exit_reason`: `reason NAME` from the ISA's table (`isa` 1 VMX, the default, 2
/// SVM), compared as a C int. None (having said so) when the reason field is missing.
fn exit_reason(
    fmt: &EventFormat,
    field: &str,
    p: &[u8],
    e: Endian,
    out: &mut Vec<u8>,
) -> Option<()> {
    let val = get_field(fmt, field, p, e, true, out)?;
    let isa = get_field(fmt, "isa", p, e, false, out).unwrap_or(1);
    let table = match isa {
        1 => Some(VMX),
        2 => Some(SVM),
        _ => None,
    };
    let reason = match table {
        None => Some("UNKNOWN-ISA"),
        Some(t) => t.iter().find(|(v, _)| *v == val as i32).map(|(_, n)| *n),
    };
    match reason {
        Some(r) => {
            out.extend_from_slice(b"reason ");
            out.extend_from_slice(r.as_bytes());
        }
        None => {
            out.extend_from_slice(b"reason UNKNOWN (");
            cfmt::write_dec(val, out);
            out.push(b')');
        }
    }
    Some(())
}

/// ` rip 0x...` (trace-cmd names the guest's function only for a host read with its guests'
/// files, from their vCPU maps).
fn rip(v: u64, out: &mut Vec<u8>) {
    out.extend_from_slice(b" rip 0x");
    cfmt::write_hex(v, out);
}

pub(super) fn kvm_exit(fmt: &EventFormat, p: &[u8], e: Endian, out: &mut Vec<u8>) -> Printed {
    let run = |out: &mut Vec<u8>| -> Option<()> {
        exit_reason(fmt, "exit_reason", p, e, out)?;
        rip(get_field(fmt, "guest_rip", p, e, true, out)?, out);
        let info1 = get_field(fmt, "info1", p, e, false, out);
        let info2 = get_field(fmt, "info2", p, e, false, out);
        if let (Some(a), Some(b)) = (info1, info2) {
            out.extend_from_slice(b" info ");
            cfmt::write_hex(a, out);
            out.push(b' ');
            cfmt::write_hex(b, out);
        }
        Some(())
    };
    handled(run(out))
}

pub(super) fn kvm_entry(fmt: &EventFormat, p: &[u8], e: Endian, out: &mut Vec<u8>) -> Printed {
    print_num_field(fmt, "vcpu_id", p, e, true, out, |v, out| {
        out.extend_from_slice(b" vcpu ");
        cfmt::write_dec(v as u32 as u64, out);
    });
    let run = |out: &mut Vec<u8>| -> Option<()> {
        rip(get_field(fmt, "rip", p, e, true, out)?, out);
        Some(())
    };
    handled(run(out))
}

/// `csbase:rip: 89 38` (and ` FAIL`): the instruction's first `len` bytes in hex.
pub(super) fn kvm_emulate_insn(
    fmt: &EventFormat,
    p: &[u8],
    e: Endian,
    out: &mut Vec<u8>,
) -> Printed {
    let run = |out: &mut Vec<u8>| -> Option<Printed> {
        let rip = get_field(fmt, "rip", p, e, true, out)?;
        let csbase = get_field(fmt, "csbase", p, e, true, out)?;
        let len = get_field(fmt, "len", p, e, true, out)?;
        get_field(fmt, "flags", p, e, true, out)?;
        let failed = get_field(fmt, "failed", p, e, true, out)?;
        let Some(insn) = own_field(fmt, "insn") else {
            out.extend_from_slice(b"<CANT FIND FIELD insn>");
            return None;
        };
        // The plugin's buffer holds 15 bytes' text, and 0 bytes leave it as it was: neither
        // is printed faithfully.
        let len = len as usize;
        if !(1..=15).contains(&len) {
            return Some(Printed::Failed);
        }
        let bytes = p.get(insn.offset..insn.offset + len)?;
        cfmt::write_hex(csbase, out);
        out.push(b':');
        cfmt::write_hex(rip, out);
        out.extend_from_slice(b": ");
        for (i, b) in bytes.iter().enumerate() {
            if i > 0 {
                out.push(b' ');
            }
            out.extend_from_slice(format!("{b:02x}").as_bytes());
        }
        if failed != 0 {
            out.extend_from_slice(b" FAIL");
        }
        Some(Printed::All)
    };
    run(out).unwrap_or(Printed::ThenPrintFmt)
}

fn nested_inject(fmt: &EventFormat, p: &[u8], e: Endian, out: &mut Vec<u8>) -> Option<()> {
    exit_reason(fmt, "exit_code", p, e, out)?;
    for (label, name) in [
        (" info1 ", "exit_info1"),
        (" info2 ", "exit_info2"),
        (" int_info ", "exit_int_info"),
        (" int_info_err ", "exit_int_info_err"),
    ] {
        print_num_field(fmt, name, p, e, true, out, |v, out| {
            out.extend_from_slice(label.as_bytes());
            cfmt::write_hex(v, out);
        });
    }
    Some(())
}

pub(super) fn kvm_nested_vmexit(
    fmt: &EventFormat,
    p: &[u8],
    e: Endian,
    out: &mut Vec<u8>,
) -> Printed {
    let run = |out: &mut Vec<u8>| -> Option<()> {
        let rip = get_field(fmt, "rip", p, e, true, out)?;
        out.extend_from_slice(b" rip ");
        cfmt::write_hex(rip, out);
        nested_inject(fmt, p, e, out)
    };
    handled(run(out))
}

pub(super) fn kvm_nested_vmexit_inject(
    fmt: &EventFormat,
    p: &[u8],
    e: Endian,
    out: &mut Vec<u8>,
) -> Printed {
    handled(nested_inject(fmt, p, e, out))
}

/// `kvm_mmu_print_role`: the role word through the plugin's bit layout when the trace's
/// byte order is this machine's (else `WORD: %08x`), the root count, `sync`/`unsync`.
pub(super) fn kvm_mmu_role(fmt: &EventFormat, p: &[u8], e: Endian, out: &mut Vec<u8>) -> Printed {
    let run = |out: &mut Vec<u8>| -> Option<()> {
        let word = get_field(fmt, "role", p, e, true, out)? as u32;
        let native = if cfg!(target_endian = "big") {
            Endian::Big
        } else {
            Endian::Little
        };
        if e == native {
            const ACCESS: [&str; 8] = ["---", "--x", "w--", "w-x", "-u-", "-ux", "wu-", "wux"];
            let bit = |n: u32| word >> n & 1 == 1;
            let text = format!(
                "{} q{}{} {}{} {}pae {}nxe {}wp{}{}{}",
                word & 0xf,
                word >> 5 & 3,
                if bit(7) { " direct" } else { "" },
                ACCESS[(word >> 8 & 7) as usize],
                if bit(11) { " invalid" } else { "" },
                if bit(4) { "" } else { "!" },
                if bit(12) { "" } else { "!" },
                if bit(13) { "" } else { "!" },
                if bit(14) { " smep" } else { "" },
                if bit(15) { " smap" } else { "" },
                if word >> 24 != 0 { " smm" } else { "" },
            );
            out.extend_from_slice(text.as_bytes());
        } else {
            out.extend_from_slice(format!("WORD: {word:08x}").as_bytes());
        }
        print_num_field(fmt, "root_count", p, e, true, out, |v, out| {
            out.extend_from_slice(b" root ");
            cfmt::write_dec(v as u32 as u64, out);
            out.push(b' ');
        });
        let unsync = get_field(fmt, "unsync", p, e, true, out)?;
        // The plugin ends with a NUL character, where trace-cmd's line ends.
        out.extend_from_slice(if unsync != 0 { b"unsync" } else { b"sync" });
        Some(())
    };
    handled(run(out))
}

pub(super) fn kvm_mmu_get_page(
    fmt: &EventFormat,
    p: &[u8],
    e: Endian,
    out: &mut Vec<u8>,
) -> Printed {
    let run = |out: &mut Vec<u8>| -> Option<()> {
        let created = get_field(fmt, "created", p, e, true, out)?;
        out.extend_from_slice(if created != 0 { b"new " } else { b"existing " });
        let gfn = get_field(fmt, "gfn", p, e, true, out)?;
        out.extend_from_slice(b"sp gfn ");
        cfmt::write_hex(gfn, out);
        out.push(b' ');
        Some(())
    };
    match run(out) {
        Some(()) => kvm_mmu_role(fmt, p, e, out),
        None => Printed::ThenPrintFmt,
    }
}
