//! `kstate cachesim --sets`: printing what [`kstate_cachesim::valgrind::lackey`]
//! found, each site's spread over one cache level's sets, as text or one JSON line.

use kstate_cachesim::sets::Symbols;
use kstate_cachesim::valgrind::Lackey;
use kstate_cachesim::Level;
use serde_json::json;

/// How much to show, from the command line.
pub(super) struct Shown {
    pub json: bool,
    /// The N first sites, the flagged then the largest (0: all).
    pub top: usize,
    /// Only sites with at least this many distinct lines.
    pub min_lines: u64,
}

/// Prints the run of `cmd` against `lvl` (read from `source`).
pub(super) fn print(run: &Lackey, lvl: &Level, source: &str, cmd: &str, shown: Shown) {
    let (d, trace, version) = (&run.detector, &run.trace, &run.version);
    let Shown {
        json,
        top,
        min_lines,
    } = shown;
    let syms = Symbols::new(&trace.objects);
    let all = d.findings(min_lines);
    let flagged = all.iter().filter(|f| f.flagged).count();
    let shown: Vec<_> = if top == 0 {
        all.iter().collect()
    } else {
        all.iter().take(top.max(flagged)).collect()
    };
    if json {
        let v = json!({
            "simulated": true,
            "simulator": "lackey",
            "valgrind": version,
            "command": cmd,
            "cache": {"level": lvl.level, "size": lvl.size, "ways": lvl.ways, "line": lvl.line,
                      "sets": lvl.sets, "from": source},
            "instructions": trace.instructions,
            "data_accesses": d.accesses,
            "sites_seen": d.sites(),
            "sites": shown.iter().map(|f| json!({
                "site": syms.name(f.ip), "ip": format!("{:#x}", f.ip),
                "accesses": f.accesses, "lines": f.lines, "sets_used": f.used_sets,
                "sets_if_even": f.even_sets, "max_lines_per_set": f.max_per_set,
                "stride": f.stride, "flagged": f.flagged, "colours": f.colours,
                "capped": f.capped,
            })).collect::<Vec<_>>(),
        });
        println!("{v}");
        return;
    }
    println!(
        "SIMULATED cache sets (valgrind lackey address trace, {version}), not this machine's counters:"
    );
    println!("  {} (from {source})", lvl.describe());
    println!("command: {cmd}");
    println!(
        "{} instructions, {} data accesses by {} sites; {} sites with at least {} lines, {flagged} flagged\n",
        trace.instructions,
        d.accesses,
        d.sites(),
        all.len(),
        min_lines
    );
    println!(
        "{:>10} {:>8} {:>9} {:>9} {:>8} {:>8}  site",
        "accesses", "lines", "sets used", "if even", "max/set", "stride"
    );
    for f in &shown {
        println!(
            "{:>10} {:>8} {:>9} {:>9} {:>8} {:>8}  {}{}{}",
            f.accesses,
            f.lines,
            f.used_sets,
            f.even_sets,
            f.max_per_set,
            f.stride,
            syms.name(f.ip),
            if f.flagged {
                format!(
                    "\n{:>57}* piles into few sets: colour it {} ways",
                    "", f.colours
                )
            } else {
                String::new()
            },
            if f.capped { " (line count capped)" } else { "" },
        );
    }
    if flagged == 0 {
        println!("\nno site piles into few sets");
    }
}
