//! The helper functions libtraceevent's plugins teach it for print fmts (plugin_jbd2,
//! plugin_xen, plugin_scsi, plugin_cfg80211, plugin_kvm): a call such as
//! `jiffies_to_msecs(REC->wait)` in a print fmt is evaluated as the plugin does, not as the
//! kernel would (`jiffies_to_msecs` gives the jiffies back unchanged). As a `%s` argument a
//! function prints its text (the conversion's width ignored, as libtraceevent does); as a
//! number it gives its return value.

/// A print fmt helper function trace-cmd knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrintFunc {
    /// plugin_jbd2: prints and returns its argument.
    JiffiesToMsecs,
    /// plugin_jbd2: `MAJOR:MINOR` of a dev_t.
    Jbd2DevToName,
    /// plugin_xen: `(name)` of a hypercall number, or nothing.
    XenHypercallName,
    /// plugin_scsi: a SCSI command block decoded (`lba=... txlen=...`).
    ScsiParseCdb,
    /// plugin_cfg80211: the little-endian 16-bit number a pointer into the record points at.
    Le16ToCpup,
    /// plugin_kvm: the writable bit of a page table entry.
    IsWritablePte,
}

impl PrintFunc {
    /// The function of that name and how many arguments it takes.
    pub fn named(name: &str) -> Option<(PrintFunc, usize)> {
        Some(match name {
            "jiffies_to_msecs" => (PrintFunc::JiffiesToMsecs, 1),
            "jbd2_dev_to_name" => (PrintFunc::Jbd2DevToName, 1),
            "xen_hypercall_name" => (PrintFunc::XenHypercallName, 1),
            "scsi_trace_parse_cdb" => (PrintFunc::ScsiParseCdb, 3),
            "__le16_to_cpup" => (PrintFunc::Le16ToCpup, 1),
            "is_writable_pte" => (PrintFunc::IsWritablePte, 1),
            _ => return None,
        })
    }
}

/// plugin_xen's names of hypercalls 0..=55 (`(name)`; none for the numbers it skips).
pub fn xen_hypercall_name(op: u32) -> &'static str {
    const NAMES: [&str; 56] = [
        "(set_trap_table)",
        "(mmu_update)",
        "(set_gdt)",
        "(stack_switch)",
        "(set_callbacks)",
        "(fpu_taskswitch)",
        "(sched_op_compat)",
        "(dom0_op)",
        "(set_debugreg)",
        "(get_debugreg)",
        "(update_descriptor)",
        "",
        "(memory_op)",
        "(multicall)",
        "(update_va_mapping)",
        "(set_timer_op)",
        "(event_channel_op_compat)",
        "(xen_version)",
        "(console_io)",
        "(physdev_op_compat)",
        "(grant_table_op)",
        "(vm_assist)",
        "(update_va_mapping_otherdomain)",
        "(iret)",
        "(vcpu_op)",
        "(set_segment_base)",
        "(mmuext_op)",
        "(acm_op)",
        "(nmi_op)",
        "(sched_op)",
        "(callback_op)",
        "(xenoprof_op)",
        "(event_channel_op)",
        "(physdev_op)",
        "(hvm_op)",
        "",
        "",
        "",
        "",
        "",
        "",
        "",
        "",
        "",
        "",
        "",
        "",
        "",
        "(arch_0)",
        "(arch_1)",
        "(arch_2)",
        "(arch_3)",
        "(arch_4)",
        "(arch_5)",
        "(arch_6)",
        "(arch_7)",
    ];
    NAMES.get(op as usize).copied().unwrap_or("")
}

/// plugin_scsi's `scsi_trace_parse_cdb`: the command block's fields by opcode. None when
/// the block is shorter than its opcode reads (the plugin would read past it).
pub fn scsi_parse_cdb(cdb: &[u8], out: &mut Vec<u8>) -> Option<()> {
    let b = |i: usize| cdb.get(i).map(|&v| v as u64);
    let be = |from: usize, n: usize| -> Option<u64> {
        (from..from + n).try_fold(0u64, |v, i| Some(v << 8 | b(i)?))
    };
    // Four bytes the plugin ORs in as `cdb[i] << 24 | ...`, C ints: a top bit set extends
    // its sign over the 64-bit sum.
    let be4 = |from: usize| be(from, 4).map(|v| v as u32 as i32 as i64 as u64);
    // `(u64)cdb[i] << 56 | ... | cdb[i + 4] << 24 | ...`.
    let be8 = |from: usize| Some(be(from, 4)? << 32 | be4(from + 4)?);
    let text = match *cdb.first()? {
        // READ_6, WRITE_6
        0x08 | 0x0a => {
            let lba = (b(1)? & 0x1f) << 16 | b(2)? << 8 | b(3)?;
            format!("lba={lba} txlen={}", b(4)?)
        }
        // READ_10, VERIFY, WRITE_10, WRITE_SAME
        op @ (0x28 | 0x2f | 0x2a | 0x41) => {
            let mut t = format!("lba={} txlen={} protect={}", be4(2)?, be(7, 2)?, b(1)? >> 5);
            if op == 0x41 {
                t += &format!(" unmap={}", b(1)? >> 3 & 1);
            }
            t
        }
        // READ_12, VERIFY_12, WRITE_12
        0xa8 | 0xaf | 0xaa => format!("lba={} txlen={} protect={}", be4(2)?, be4(6)?, b(1)? >> 5),
        // READ_16, VERIFY_16, WRITE_16, WRITE_SAME_16
        op @ (0x88 | 0x8f | 0x8a | 0x93) => {
            let mut t = format!("lba={} txlen={} protect={}", be8(2)?, be4(10)?, b(1)? >> 5);
            if op == 0x93 {
                t += &format!(" unmap={}", b(1)? >> 3 & 1);
            }
            t
        }
        // UNMAP
        0x42 => format!("regions={}", (be(7, 2)? as u32).wrapping_sub(8) / 16),
        // SERVICE_ACTION_IN_16: READ_CAPACITY_16, GET_LBA_STATUS
        0x9e => match b(1)? & 0x1f {
            sa @ (0x10 | 0x12) => format!(
                "{} lba={} alloc_len={}",
                if sa == 0x10 {
                    "READ_CAPACITY_16"
                } else {
                    "GET_LBA_STATUS"
                },
                be8(2)?,
                be(10, 4)?
            ),
            _ => "UNKNOWN".to_string(),
        },
        // VARIABLE_LENGTH_CMD: READ_32, VERIFY_32, WRITE_32, WRITE_SAME_32
        0x7f => match be(8, 2)? {
            sa @ (0x09 | 0x0a | 0x0b | 0x0d) => {
                let cmd = match sa {
                    0x09 => "READ",
                    0x0a => "VERIFY",
                    0x0b => "WRITE",
                    _ => "WRITE_SAME",
                };
                let mut t = format!(
                    "{cmd}_32 lba={} txlen={} protect={} ei_lbrt={}",
                    be8(12)?,
                    be4(28)?,
                    b(10)? >> 5,
                    be(20, 4)?
                );
                if sa == 0x0d {
                    t += &format!(" unmap={}", b(10)? >> 3 & 1);
                }
                t
            }
            _ => "-".to_string(),
        },
        _ => "-".to_string(),
    };
    out.extend_from_slice(text.as_bytes());
    Some(())
}
