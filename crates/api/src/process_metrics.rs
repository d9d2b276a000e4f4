//! The standard Prometheus process metrics of this process (Linux), read from `/proc` at each
//! scrape: `process_cpu_seconds_total` (a counter, in fractional seconds of user plus system
//! time), `process_open_fds`, `process_max_fds`, `process_virtual_memory_bytes`,
//! `process_resident_memory_bytes`, `process_start_time_seconds` and `process_threads`.

use std::sync::Mutex;

use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{Counter, Gauge, IntGauge, Opts};

/// The process collector; [`register`] adds it to the default registry once.
pub struct ProcessMetrics {
    descs: Vec<Desc>,
    cpu_seconds: Counter,
    open_fds: IntGauge,
    max_fds: IntGauge,
    virtual_memory: IntGauge,
    resident_memory: IntGauge,
    start_time: Gauge,
    threads: IntGauge,
    /// Serialises scrapes: the CPU counter advances by the difference since the last one.
    scrape: Mutex<()>,
}

impl ProcessMetrics {
    fn new() -> Result<ProcessMetrics, prometheus::Error> {
        let cpu_seconds = Counter::with_opts(Opts::new(
            "process_cpu_seconds_total",
            "Total user and system CPU time spent in seconds.",
        ))?;
        let open_fds = IntGauge::new("process_open_fds", "Number of open file descriptors.")?;
        let max_fds = IntGauge::new(
            "process_max_fds",
            "Maximum number of open file descriptors.",
        )?;
        let virtual_memory = IntGauge::new(
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes.",
        )?;
        let resident_memory = IntGauge::new(
            "process_resident_memory_bytes",
            "Resident memory size in bytes.",
        )?;
        let start_time = Gauge::new(
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds.",
        )?;
        let threads = IntGauge::new("process_threads", "Number of OS threads in the process.")?;
        let mut descs = Vec::new();
        descs.extend(cpu_seconds.desc().into_iter().cloned());
        for g in [
            &open_fds,
            &max_fds,
            &virtual_memory,
            &resident_memory,
            &threads,
        ] {
            descs.extend(g.desc().into_iter().cloned());
        }
        descs.extend(start_time.desc().into_iter().cloned());
        Ok(ProcessMetrics {
            descs,
            cpu_seconds,
            open_fds,
            max_fds,
            virtual_memory,
            resident_memory,
            start_time,
            threads,
            scrape: Mutex::new(()),
        })
    }

    /// Reads `/proc/self`; a value that cannot be read keeps its last one.
    fn refresh(&self) {
        let Ok(me) = procfs::process::Process::myself() else {
            return;
        };
        if let Ok(n) = me.fd_count() {
            self.open_fds.set(i64::try_from(n).unwrap_or(i64::MAX));
        }
        if let Ok(limits) = me.limits()
            && let procfs::process::LimitValue::Value(max) = limits.max_open_files.soft_limit
        {
            self.max_fds.set(i64::try_from(max).unwrap_or(i64::MAX));
        }
        let Ok(stat) = me.stat() else {
            return;
        };
        let ticks = procfs::ticks_per_second() as f64;
        let page = procfs::page_size();
        self.virtual_memory
            .set(i64::try_from(stat.vsize).unwrap_or(i64::MAX));
        self.resident_memory
            .set(i64::try_from(stat.rss.saturating_mul(page)).unwrap_or(i64::MAX));
        self.threads.set(stat.num_threads);
        if ticks > 0.0 {
            let cpu = (stat.utime + stat.stime) as f64 / ticks;
            let counted = self.cpu_seconds.get();
            if cpu > counted {
                self.cpu_seconds.inc_by(cpu - counted);
            }
            if let Ok(boot) = procfs::boot_time_secs() {
                self.start_time
                    .set(boot as f64 + stat.starttime as f64 / ticks);
            }
        }
    }
}

impl Collector for ProcessMetrics {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        {
            let _one_at_a_time = self.scrape.lock().unwrap_or_else(|e| e.into_inner());
            self.refresh();
        }
        let mut out = Vec::with_capacity(7);
        out.extend(self.cpu_seconds.collect());
        for g in [
            &self.open_fds,
            &self.max_fds,
            &self.virtual_memory,
            &self.resident_memory,
            &self.threads,
        ] {
            out.extend(g.collect());
        }
        out.extend(self.start_time.collect());
        out
    }
}

/// Registers the process metrics in the default registry, once per process.
pub fn register() {
    static DONE: std::sync::Once = std::sync::Once::new();
    DONE.call_once(|| {
        let registered =
            ProcessMetrics::new().and_then(|collector| prometheus::register(Box::new(collector)));
        if let Err(e) = registered {
            tracing::warn!(error = %e, "cannot register the process metrics");
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_is_fractional_seconds_and_start_time_is_set() {
        let m = ProcessMetrics::new().expect("collector");
        // Burn a little CPU so the counter has something to show.
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let families = m.collect();
        assert_eq!(families.len(), 7);
        let cpu = m.cpu_seconds.get();
        assert!(cpu > 0.0, "cpu {cpu}");
        assert!(m.start_time.get() > 1.0e9);
        assert!(m.resident_memory.get() > 0);
        assert!(m.open_fds.get() > 0);
        let cpu_family = families
            .iter()
            .find(|f| f.name() == "process_cpu_seconds_total")
            .expect("cpu family");
        assert_eq!(
            cpu_family.get_field_type(),
            prometheus::proto::MetricType::COUNTER
        );
    }
}
