//! Rank 0's output: the header, the rows as they come (IMB-style table or
//! CSV), and the summary of `all`.

use crate::report::{CSV_HEADER, Format, Row, csv_line, table};
use gaspi::Context;
use gaspi::launcher::Binding;
use std::io::Write;

/// This machine in one line, for the record (tables and plots).
pub fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    // The job's CPUs (the launcher's): a bound rank sees only its own.
    let cores = std::env::var(gaspi::env::CPUS)
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(0, |n| n.get()));
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!("{cpu}, {cores} cores, Linux {}", kernel.trim())
}

/// Rank 0's printer (other ranks' prints nothing).
pub struct Printer {
    format: Format,
    prints: bool,
    rows: Vec<Row>,
}

impl Printer {
    pub fn new(format: Format, prints: bool) -> Printer {
        Printer {
            format,
            prints,
            rows: Vec::new(),
        }
    }

    /// Whether this rank prints.
    pub fn prints(&self) -> bool {
        self.prints
    }

    /// Whether every row so far verified its data.
    pub fn verified(&self) -> bool {
        self.rows.iter().all(|r| r.verified)
    }

    /// The run's header: what, where, with what.
    pub fn header(&self, bench: &str, ctx: &Context, bind: Binding) {
        if !self.prints {
            return;
        }
        let n = ctx.num_ranks();
        let ppn = ctx.ranks_per_node();
        let wait = std::env::var(gaspi::env::WAIT).unwrap_or_else(|_| "auto".into());
        // Rank 0's view: whether its CPUs are its own (its waits spin).
        let own = if ctx.cpus_of_its_own() {
            " (own CPUs)"
        } else {
            ""
        };
        match self.format {
            Format::Table => println!(
                "# gaspi-bench {bench} on {n} ranks ({ppn} per node), engine {:?}, wait {wait}{own}, bind {bind:?}, gaspi {}\n# machine: {}",
                ctx.engine(),
                Context::version(),
                machine()
            ),
            Format::Csv => println!("{CSV_HEADER}"),
        }
    }

    /// Print `rows` under `title` (rank 0) and keep them for the summary.
    pub fn emit(&mut self, title: &str, rows: Vec<Row>) {
        if !self.prints {
            return;
        }
        let mut out = std::io::stdout().lock();
        match self.format {
            Format::Table => {
                let _ = writeln!(out, "\n# {title}");
                let _ = write!(out, "{}", table(&rows));
            }
            Format::Csv => {
                for r in &rows {
                    let _ = writeln!(out, "{}", csv_line(r));
                }
            }
        }
        let _ = out.flush();
        self.rows.extend(rows);
    }

    fn find(&self, bench: &str, imp: &str, bytes: usize) -> Option<&Row> {
        self.rows
            .iter()
            .find(|r| r.bench == bench && r.imp == imp && r.bytes == bytes)
    }

    /// The summary of `all`.
    pub fn summary(&self, ranks: usize, secs: f64) {
        if !self.prints {
            return;
        }
        let mut lines = Vec::new();
        let us = |r: Option<&Row>| r.map_or("-".to_string(), |r| format!("{:.3} us", r.median()));
        lines.push(format!(
            "write-notify-lat   8 B       {} one way (ranks 0-1)",
            us(self.find("write-notify-lat", "gaspi", 8))
        ));
        if let (Some(g), Some(m)) = (
            self.find("write-bw", "gaspi", 4 << 20),
            self.find("write-bw", "memcpy", 4 << 20),
        ) {
            lines.push(format!(
                "write-bw           4 MiB     {:.0} MB/s = {:.0}% of memcpy ({:.0} MB/s, same run)",
                g.mbps(),
                100.0 * g.mbps() / m.mbps(),
                m.mbps()
            ));
        }
        lines.push(format!(
            "read-lat           8 B       {}",
            us(self.find("read-lat", "gaspi", 8))
        ));
        lines.push(format!(
            "atomic-lat         8 B       {}",
            us(self.find("atomic-lat", "gaspi", 8))
        ));
        lines.push(format!(
            "passive-lat        8 B       {} one way (ranks 0-1)",
            us(self.find("passive-lat", "gaspi", 8))
        ));
        lines.push(format!(
            "barrier            {ranks} ranks   {}",
            us(self.find("barrier", "gaspi", 0))
        ));
        lines.push(format!(
            "allreduce          8 B       {} ({ranks} ranks; naive {}, GASPI's {})",
            us(self.find("allreduce", "auto", 8)),
            us(self.find("allreduce", "naive", 8)),
            us(self.find("allreduce", "gaspi", 8))
        ));
        for size in [1 << 20] {
            if let (Some(r), Some(nv)) = (
                self.find("allgatherv-regular", "ring-shared", size),
                self.find("allgatherv-regular", "naive", size),
            ) {
                lines.push(format!(
                    "allgatherv         1 MiB     {:.1} us per call, naive {:.1} us (per rank, regular)",
                    r.median(),
                    nv.median()
                ));
            }
        }
        lines.push(format!(
            "alltoallv          64 KiB    {} per call, private {}, sizes unknown {} (varying {}), flat {} (per pair, regular)",
            us(self.find("alltoallv-regular", "aggregated", 65_536)),
            us(self.find("alltoallv-regular", "aggregated-private", 65_536)),
            us(self.find("alltoallv-regular", "unknown-private", 65_536)),
            us(self.find("alltoallv-regular", "unknown-varying", 65_536)),
            us(self.find("alltoallv-regular", "flat", 65_536)),
        ));
        lines.push(format!(
            "stencil            512 KiB   {} per sweep node-shared, flat {} (block per rank, 2-D cut)",
            us(self.find("stencil-2d", "node", 524_288)),
            us(self.find("stencil-2d", "flat", 524_288)),
        ));
        let gups = |imp: &str| {
            self.find("gups", imp, 8 << 20)
                .map_or("-".to_string(), |r| format!("{:.4} GUP/s", r.mbps() / 1e3))
        };
        lines.push(format!(
            "gups               8 MiB     {} node-shared, atomics {}, flat {} (table per rank, exact)",
            gups("node"),
            gups("node-atomic"),
            gups("flat"),
        ));
        lines.push(format!(
            "fence              8 B       {} per epoch, one put to the right (notified; opt {}, deferred {})",
            us(self.find("fence", "single:notified", 8)),
            us(self.find("fence", "single:opt", 8)),
            us(self.find("fence", "single:deferred", 8))
        ));
        lines.push(format!(
            "lock               8 B       {} exclusive lock + put + unlock of rank {} (two-level; mcs-rw {}); {} contenders: {}",
            us(self.find("lock", "two-level:excl-same:c1", 8)),
            ranks - 1,
            us(self.find("lock", "mcs-rw:excl-same:c1", 8)),
            ranks,
            us(self.find("lock", &format!("two-level:excl-same:c{ranks}"), 8)),
        ));
        lines.push(format!(
            "bcast              1 MiB     {} binomial, {} linear, {} node (rank 0 to {ranks} ranks, + flush)",
            us(self.find("bcast", "binomial", 1 << 20)),
            us(self.find("bcast", "linear", 1 << 20)),
            us(self.find("bcast", "node", 1 << 20)),
        ));
        let median = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v.get(v.len() / 2).copied()
        };
        for place in ["intra", "inter"] {
            let mut m: Vec<f64> = self
                .rows
                .iter()
                .filter(|r| {
                    r.bench == "put-lat-distance" && r.bytes == 8 && r.imp.starts_with(place)
                })
                .map(Row::median)
                .collect();
            if let Some(x) = median(&mut m) {
                lines.push(format!(
                    "put-lat-distance   8 B       {x:.3} us to ranks {place}-node (median over targets)"
                ));
            }
        }
        lines.push(match self.find("shared-notify-lat", "gaspi", 16) {
            Some(r) => format!(
                "shared-notify-lat  16 B      {:.3} us one way, remote write_notify to a claim in node 1",
                r.median()
            ),
            None => "shared-notify-lat  16 B      - (not run: needs 2 nodes; gaspi-run --ppn P \
                     with P < ranks)"
                .to_string(),
        });
        let verified = self.rows.iter().all(|r| r.verified);
        println!("\n# summary (medians over batches), {ranks} ranks, {secs:.1} s");
        for l in lines {
            println!("#   {l}");
        }
        println!(
            "#   data verified in every benchmark: {}",
            if verified { "yes" } else { "NO" }
        );
    }
}
