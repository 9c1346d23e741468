//! The live view's model: what `scx_gmp top` keeps between refreshes (the last interval,
//! reduced to what is drawn, and the latency heat map's history), with no drawing in it.

use crate::metrics::Metrics;
use crate::stats::{bucket_upper_us, percentile_us, Gauges, Report, Sample, NR_LAT_BUCKETS};
use std::collections::VecDeque;

/// Latency rows of the heat map: powers of two of microseconds, top row open-ended.
pub(super) const HEAT_ROWS: usize = 18;
/// Columns of history kept for the heat map.
const HISTORY: usize = 240;

/// One interval, reduced to what the view draws.
pub(super) struct Frame1 {
    pub(super) report_line: String,
    pub(super) elapsed_ms: u64,
    pub(super) interval_s: f64,
    pub(super) g: Gauges,
    pub(super) d: Sample,
}

/// Heat map column: counts per latency row, and the p50/p99 rows.
pub(super) struct HeatCol {
    pub(super) rows: [u64; HEAT_ROWS],
    pub(super) p50_row: usize,
    pub(super) p99_row: usize,
}

/// Row of a latency bucket: row r holds latencies below 2^(r+2) us (row 0: below 4 us).
pub(super) fn heat_row(bucket: usize) -> usize {
    let upper = bucket_upper_us(bucket).max(1);
    let log2 = 64 - (upper - 1).leading_zeros() as usize; // ceil(log2(upper))
    log2.saturating_sub(2).min(HEAT_ROWS - 1)
}

pub(super) fn heat_col(lat: &[u64]) -> HeatCol {
    let mut rows = [0u64; HEAT_ROWS];
    for (b, n) in lat.iter().enumerate().take(NR_LAT_BUCKETS) {
        rows[heat_row(b)] += n;
    }
    let row_of = |us: u64| -> usize {
        let log2 = 64 - us.max(1).saturating_sub(1).leading_zeros() as usize;
        log2.saturating_sub(2).min(HEAT_ROWS - 1)
    };
    HeatCol {
        rows,
        p50_row: row_of(percentile_us(lat, 0.5)),
        p99_row: row_of(percentile_us(lat, 0.99)),
    }
}

pub(super) struct View {
    pub(super) last: Option<Frame1>,
    pub(super) heat: VecDeque<HeatCol>,
    pub(super) status: String,
}

impl View {
    pub(super) fn new() -> Self {
        Self {
            last: None,
            heat: VecDeque::new(),
            status: "connecting to scx_gmp...".into(),
        }
    }

    pub(super) fn push(&mut self, prev: &Metrics, cur: &Metrics) {
        let (d, g, interval_s) = cur.since(prev);
        let r = Report {
            elapsed_ms: cur.ts_ms,
            interval_s,
            d: &d,
            g: &g,
        };
        let report_line = r.to_schedtrace();
        self.heat.push_back(heat_col(&d.lat));
        while self.heat.len() > HISTORY {
            self.heat.pop_front();
        }
        self.last = Some(Frame1 {
            report_line,
            elapsed_ms: cur.ts_ms,
            interval_s,
            g,
            d,
        });
        self.status.clear();
    }
}
