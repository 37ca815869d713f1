//! trace.dat files built by a test: event formats written out as the kernel writes them
//! (from its `TRACE_EVENT` definitions), records with chosen field values, kallsyms and
//! saved comms, written through kstate's own writer (a v7 file trace-cmd reads). The
//! oracle tests give the same file to `trace-cmd report` and `kstate dump`.

use std::path::Path;

use kstate_format::page_builder::PageBuilder;
use kstate_format::writer::{TraceWriter, WriterConfig};
use kstate_format::{Endian, EventFormat, FieldKind, PageLayout};

/// A 4 KiB ring-buffer page of a 64-bit kernel, as `events/header_page` describes it.
pub const HEADER_PAGE: &str = "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n\
\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n\
\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n\
\tfield: char data;\toffset:16;\tsize:4080;\tsigned:0;\n";

/// The common fields every event starts with (offsets 0..8).
const COMMON: &str = "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n";

/// A field's value in a record being built.
#[derive(Debug, Clone)]
pub enum Val {
    /// An integer, stored in the field's size.
    U(u64),
    /// Bytes copied to the start of a fixed array field (the rest stays 0).
    Bytes(Vec<u8>),
    /// A `__data_loc` field's data, appended after the fixed part of the record.
    Dyn(Vec<u8>),
}

/// A NUL-terminated string for a `__data_loc char[]` field.
pub fn dyn_str(s: &str) -> Val {
    let mut b = s.as_bytes().to_vec();
    b.push(0);
    Val::Dyn(b)
}

/// The format file text of one event: the common fields, `fields` (the kernel's
/// `\tfield:...;` lines), and the print fmt.
pub fn format_text(name: &str, id: u32, fields: &str, print_fmt: &str) -> String {
    format!("name: {name}\nID: {id}\nformat:\n{COMMON}\n{fields}\nprint fmt: {print_fmt}\n")
}

/// A trace being built: formats, records (per CPU, in time order), kallsyms, comms.
pub struct Built {
    formats: Vec<(String, String, EventFormat)>,
    events: Vec<(u32, u64, Vec<u8>)>,
    kallsyms: String,
    printk: String,
    comms: Vec<(i32, String)>,
    next_id: u32,
}

impl Default for Built {
    fn default() -> Self {
        Built {
            formats: Vec::new(),
            events: Vec::new(),
            kallsyms: String::new(),
            printk: String::new(),
            comms: Vec::new(),
            next_id: 500,
        }
    }
}

impl Built {
    /// Adds the format of `system:name` with the given field lines and print fmt; the id
    /// is chosen here.
    pub fn event_format(&mut self, system: &str, name: &str, fields: &str, print_fmt: &str) {
        let id = self.next_id;
        self.next_id += 1;
        self.format_text(system, &format_text(name, id, fields, print_fmt));
    }

    /// Adds a whole format file's text (with its own `ID:`).
    pub fn format_text(&mut self, system: &str, text: &str) {
        let ev = EventFormat::parse(text.as_bytes(), system, 8)
            .unwrap_or_else(|e| panic!("format of {system} does not parse: {e}\n{text}"));
        self.formats
            .push((system.to_string(), text.to_string(), ev));
    }

    pub fn kallsyms(&mut self, text: &str) {
        self.kallsyms.push_str(text);
    }

    pub fn printk(&mut self, text: &str) {
        self.printk.push_str(text);
    }

    pub fn comm(&mut self, pid: i32, comm: &str) {
        self.comms.push((pid, comm.to_string()));
    }

    fn find(&self, name: &str) -> &EventFormat {
        self.formats
            .iter()
            .map(|(_, _, e)| e)
            .find(|e| e.name == name)
            .unwrap_or_else(|| panic!("no format {name}"))
    }

    /// Adds a record of event `name` on `cpu` at `ts` ns by `pid`, with the named fields
    /// set (the others 0).
    pub fn record(&mut self, cpu: u32, ts: u64, pid: i32, name: &str, vals: &[(&str, Val)]) {
        let payload = self.payload(name, pid, vals);
        self.events.push((cpu, ts, payload));
    }

    /// The bytes of a record of `name`.
    pub fn payload(&self, name: &str, pid: i32, vals: &[(&str, Val)]) -> Vec<u8> {
        let ev = self.find(name);
        let e = Endian::Little;
        let fixed = ev
            .common
            .iter()
            .chain(&ev.fields)
            .map(|f| f.offset + f.size)
            .max()
            .unwrap_or(8);
        let mut p = vec![0u8; fixed];
        e.put_uint(&mut p[0..2], ev.id as u64);
        e.put_uint(&mut p[4..8], pid as u32 as u64);
        for (fname, v) in vals {
            let f = ev
                .field(fname)
                .unwrap_or_else(|| panic!("{name} has no field {fname}"));
            match v {
                Val::U(x) => {
                    assert!(
                        matches!(f.size, 1 | 2 | 4 | 8),
                        "{name}.{fname} is not an integer"
                    );
                    e.put_uint(&mut p[f.offset..f.offset + f.size], *x);
                }
                Val::Bytes(b) => {
                    assert!(
                        b.len() <= f.size,
                        "{name}.{fname}: {} bytes in {}",
                        b.len(),
                        f.size
                    );
                    p[f.offset..f.offset + b.len()].copy_from_slice(b);
                }
                Val::Dyn(b) => {
                    assert!(
                        matches!(f.kind, FieldKind::Dynamic { .. }),
                        "{name}.{fname}"
                    );
                    let at = p.len();
                    p.extend_from_slice(b);
                    let word = (b.len() as u64) << 16 | at as u64;
                    e.put_uint(&mut p[f.offset..f.offset + 4], word);
                }
            }
        }
        p
    }

    /// Adds a record whose payload is given whole (for records no format describes well).
    pub fn raw_record(&mut self, cpu: u32, ts: u64, payload: Vec<u8>) {
        self.events.push((cpu, ts, payload));
    }

    /// Writes the trace to `path`.
    pub fn write(&self, path: &Path) {
        let page_size = 4096;
        let mut cfg = WriterConfig::new(page_size);
        cfg.endian = Endian::Little;
        let cpus = self.events.iter().map(|e| e.0 + 1).max().unwrap_or(1);
        cfg.cpu_count = Some(cpus);
        let mut w = TraceWriter::create(path, cfg).expect("create the trace");
        w.header_page(HEADER_PAGE.as_bytes()).expect("header_page");
        for (system, text, _) in &self.formats {
            w.event_format(system, text.as_bytes());
        }
        if !self.kallsyms.is_empty() {
            w.kallsyms(self.kallsyms.as_bytes());
        }
        if !self.printk.is_empty() {
            w.printk_formats(self.printk.as_bytes());
        }
        let comms: String = self
            .comms
            .iter()
            .map(|(p, c)| format!("{p} {c}\n"))
            .collect();
        w.cmdlines(comms.as_bytes());
        let layout =
            PageLayout::parse(HEADER_PAGE.as_bytes(), Endian::Little, Some(page_size)).unwrap();
        for cpu in 0..cpus {
            let mut pages: Vec<Vec<u8>> = Vec::new();
            let mut b = PageBuilder::new(layout);
            let mut done = |pg: &[u8]| pages.push(pg.to_vec());
            let mut evs: Vec<&(u32, u64, Vec<u8>)> =
                self.events.iter().filter(|e| e.0 == cpu).collect();
            evs.sort_by_key(|e| e.1);
            for (_, ts, payload) in evs {
                assert!(
                    b.push(*ts, payload, &mut done),
                    "a record too big for a page"
                );
            }
            b.finish(&mut done);
            let mut cw = w.cpu_writer(cpu).expect("cpu writer");
            for pg in &pages {
                cw.write_page(pg).expect("write a page");
            }
            cw.finish().expect("finish the CPU");
        }
        w.finish().expect("finish the trace");
    }
}
