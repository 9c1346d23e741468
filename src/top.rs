//! `scx_gmp top`: a full-screen live view of the running scx_gmp, fed by the stats server.
//! Falls back to the plain line output when stdout is not a terminal.

use crate::metrics::{Format, Metrics};
use crate::stats::{bucket_upper_us, percentile_us, Gauges, Report, Sample, NR_LAT_BUCKETS};
use anyhow::{Context, Result};
use ratatui::crossterm::event::{self, Event, KeyCode};
use ratatui::layout::{Constraint, Direction, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};
use ratatui::Frame;
use std::collections::VecDeque;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Latency rows of the heat map: powers of two of microseconds, top row open-ended.
const HEAT_ROWS: usize = 18;
/// Columns of history kept for the heat map.
const HISTORY: usize = 240;

/// One interval, reduced to what the view draws.
struct Frame1 {
    report_line: String,
    elapsed_ms: u64,
    interval_s: f64,
    g: Gauges,
    d: Sample,
    cpu_node: Vec<u32>,
}

/// Heat map column: counts per latency row, and the p50/p99 rows.
struct HeatCol {
    rows: [u64; HEAT_ROWS],
    p50_row: usize,
    p99_row: usize,
}

/// Row of a latency bucket: row r holds latencies below 2^(r+2) us (row 0: below 4 us).
fn heat_row(bucket: usize) -> usize {
    let upper = bucket_upper_us(bucket).max(1);
    let log2 = 64 - (upper - 1).leading_zeros() as usize; // ceil(log2(upper))
    log2.saturating_sub(2).min(HEAT_ROWS - 1)
}

fn heat_col(lat: &[u64]) -> HeatCol {
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

fn row_label(r: usize) -> String {
    let us = 1u64 << (r + 2);
    if r == HEAT_ROWS - 1 {
        format!(">{:>5}", fmt_us(us / 2))
    } else {
        format!("<{:>5}", fmt_us(us))
    }
}

fn fmt_us(us: u64) -> String {
    if us >= 1_000_000 {
        format!("{}s", us / 1_000_000)
    } else if us >= 1000 {
        format!("{}ms", us / 1000)
    } else {
        format!("{us}us")
    }
}

struct View {
    last: Option<Frame1>,
    heat: VecDeque<HeatCol>,
    status: String,
}

impl View {
    fn new() -> Self {
        Self {
            last: None,
            heat: VecDeque::new(),
            status: "connecting to scx_gmp...".into(),
        }
    }

    fn push(&mut self, prev: &Metrics, cur: &Metrics) {
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
            cpu_node: cur.cpu_node.clone(),
        });
        self.status.clear();
    }

    fn draw(&self, f: &mut Frame) {
        let area = f.area();
        let outer = Layout::default()
            .direction(Direction::Vertical)
            .constraints([
                Constraint::Length(3),
                Constraint::Min(8),
                Constraint::Length(HEAT_ROWS as u16 + 2),
            ])
            .split(area);
        let Some(fr) = &self.last else {
            f.render_widget(
                Paragraph::new(format!("{}  (q quits)", self.status)).block(
                    Block::default()
                        .borders(Borders::ALL)
                        .title(" scx_gmp top "),
                ),
                area,
            );
            return;
        };
        let title = format!(" scx_gmp top  {}s  (q quits) ", fr.elapsed_ms / 1000);
        f.render_widget(
            Paragraph::new(fr.report_line.clone())
                .block(Block::default().borders(Borders::ALL).title(title)),
            outer[0],
        );
        let mid = Layout::default()
            .direction(Direction::Horizontal)
            .constraints([Constraint::Percentage(60), Constraint::Percentage(40)])
            .split(outer[1]);
        self.draw_cpus(f, mid[0], fr);
        self.draw_summary(f, mid[1], fr);
        self.draw_heat(f, outer[2]);
    }

    fn draw_cpus(&self, f: &mut Frame, area: Rect, fr: &Frame1) {
        let r = Report {
            elapsed_ms: fr.elapsed_ms,
            interval_s: fr.interval_s,
            d: &fr.d,
            g: &fr.g,
        };
        let maxq = fr.g.local_queued.iter().copied().max().unwrap_or(0).max(8);
        let bar_w = 16usize;
        let mut lines = vec![Line::from(Span::styled(
            "CPU  node proc  queue            busy  ran (local/runnext/shared/stolen)",
            Style::default().add_modifier(Modifier::BOLD),
        ))];
        let ncpu = fr.cpu_node.len().max(fr.d.per_cpu.len());
        for c in 0..ncpu {
            let in_procs = fr.g.procs.contains(&c);
            let q = fr.g.local_queued.get(c).copied().unwrap_or(0);
            let filled = ((q as usize * bar_w) / maxq as usize).min(bar_w);
            let busy = r.busy_pct(c);
            let v = |n: &str| fr.d.cpu(c, n);
            let busy_color = if busy > 90.0 {
                Color::Red
            } else if busy > 50.0 {
                Color::Yellow
            } else {
                Color::Green
            };
            lines.push(Line::from(vec![
                Span::raw(format!(
                    "P{c:<3} {:>4} {:>4}  ",
                    fr.cpu_node.get(c).copied().unwrap_or(0),
                    if in_procs { "in" } else { "out" }
                )),
                Span::styled("█".repeat(filled), Style::default().fg(Color::Cyan)),
                Span::raw(format!("{}{q:>3} ", "·".repeat(bar_w - filled))),
                Span::styled(format!("{busy:>5.1}%"), Style::default().fg(busy_color)),
                Span::raw(format!(
                    "  {}/{}/{}/{}",
                    v("disp_local"),
                    v("disp_runnext"),
                    v("disp_shared") + v("disp_fair_tick"),
                    v("stolen_tasks")
                )),
            ]));
        }
        f.render_widget(
            Paragraph::new(lines)
                .block(Block::default().borders(Borders::ALL).title(" processors ")),
            area,
        );
    }

    fn draw_summary(&self, f: &mut Frame, area: Rect, fr: &Frame1) {
        let d = &fr.d;
        let t = |n: &str| d.total(n);
        let per_s = |v: u64| v as f64 / fr.interval_s.max(0.001);
        let mix = [
            ("runnext", t("disp_runnext")),
            ("local", t("disp_local").saturating_sub(t("disp_runnext"))),
            ("shared", t("disp_shared")),
            ("fair tick", t("disp_fair_tick")),
            ("steal llc", t("disp_steal_llc")),
            ("steal node", t("disp_steal_node")),
            ("steal remote", t("disp_steal_remote")),
            ("direct idle", t("enq_direct_idle")),
        ];
        let total: u64 = mix.iter().map(|(_, v)| v).sum::<u64>().max(1);
        let mut lines = vec![Line::from(Span::styled(
            "shared queues",
            Style::default().add_modifier(Modifier::BOLD),
        ))];
        for (n, q) in fr.g.shared_queued.iter().enumerate() {
            lines.push(Line::from(format!("  node{n}: {q}")));
        }
        lines.push(Line::from(Span::styled(
            "dispatch mix",
            Style::default().add_modifier(Modifier::BOLD),
        )));
        for (name, v) in mix {
            let pct = 100.0 * v as f64 / total as f64;
            let w = (pct / 5.0).round() as usize;
            lines.push(Line::from(vec![
                Span::raw(format!("  {name:<12} {pct:>5.1}% ")),
                Span::styled("▇".repeat(w), Style::default().fg(Color::Magenta)),
            ]));
        }
        let l = t("numa_local") as f64;
        let rm = t("numa_remote") as f64;
        lines.push(Line::from(format!(
            "steals/s {:.0} ({:.0} tasks)  preempt/s {:.0} sysmon + {:.0} slice",
            per_s(t("disp_steal_llc") + t("disp_steal_node") + t("disp_steal_remote")),
            per_s(t("stolen_tasks")),
            per_s(t("preempt_sysmon")),
            per_s(t("preempt_slice")),
        )));
        lines.push(Line::from(format!(
            "NUMA local {:.1}%  cross-node migrations/s {:.0}",
            if l + rm > 0.0 {
                100.0 * l / (l + rm)
            } else {
                100.0
            },
            per_s(t("migrations_node"))
        )));
        f.render_widget(
            Paragraph::new(lines).block(
                Block::default()
                    .borders(Borders::ALL)
                    .title(" queues, dispatch, steals "),
            ),
            area,
        );
    }

    fn draw_heat(&self, f: &mut Frame, area: Rect) {
        const SHADES: [char; 6] = [' ', '░', '▒', '▓', '█', '█'];
        let width = area.width.saturating_sub(10) as usize;
        let cols: Vec<&HeatCol> = self
            .heat
            .iter()
            .rev()
            .take(width)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        let mut lines = Vec::new();
        for r in (0..HEAT_ROWS).rev() {
            let mut spans = vec![Span::raw(format!("{} ", row_label(r)))];
            for col in &cols {
                let total: u64 = col.rows.iter().sum::<u64>().max(1);
                let share = col.rows[r] as f64 / total as f64;
                let shade = if col.rows[r] == 0 {
                    0
                } else {
                    1 + ((share * 4.0).ceil() as usize).min(4)
                };
                let (ch, style) = if r == col.p99_row {
                    ('9', Style::default().fg(Color::Red))
                } else if r == col.p50_row {
                    ('5', Style::default().fg(Color::Yellow))
                } else {
                    (SHADES[shade], Style::default().fg(Color::Blue))
                };
                spans.push(Span::styled(ch.to_string(), style));
            }
            lines.push(Line::from(spans));
        }
        f.render_widget(
            Paragraph::new(lines).block(
                Block::default()
                    .borders(Borders::ALL)
                    .title(" wakeup-to-run latency: one column a second, 5 = p50, 9 = p99 "),
            ),
            area,
        );
    }
}

/// Run the live view until q (or Ctrl-C); on a non-terminal, print report lines instead.
pub fn run(interval: f64, shutdown: &AtomicBool) -> Result<()> {
    if !std::io::stdout().is_terminal() {
        return crate::metrics::print_stream(interval, Format::default(), shutdown);
    }

    let mut terminal = ratatui::init();
    let res = event_loop(&mut terminal, interval, shutdown);
    ratatui::restore();
    res
}

fn event_loop(
    terminal: &mut ratatui::DefaultTerminal,
    interval: f64,
    shutdown: &AtomicBool,
) -> Result<()> {
    let mut view = View::new();
    let mut client: Option<scx_stats::StatsClient> = None;
    let mut prev: Option<Metrics> = None;
    let period = Duration::from_secs_f64(interval);
    let mut next = Instant::now();
    while !shutdown.load(Ordering::Relaxed) {
        if Instant::now() >= next {
            next += period;
            if client.is_none() {
                client = scx_stats::StatsClient::new().connect(None).ok();
                if client.is_none() {
                    view.status = "waiting for a running scx_gmp (no stats server yet)".into();
                }
            }
            if let Some(c) = client.as_mut() {
                match c.request::<Metrics>("stats", vec![]) {
                    Ok(m) => {
                        if let Some(p) = prev.as_ref().filter(|p| p.ts_ms < m.ts_ms) {
                            view.push(p, &m);
                        }
                        prev = Some(m);
                    }
                    Err(e) => {
                        view.status = format!("lost scx_gmp's stats server ({e}); reconnecting");
                        client = None;
                        prev = None;
                    }
                }
            }
        }
        terminal.draw(|f| view.draw(f)).context("failed to draw")?;
        let wait = next
            .saturating_duration_since(Instant::now())
            .min(Duration::from_millis(200));
        if event::poll(wait).context("terminal input failed")? {
            if let Event::Key(k) = event::read().context("terminal input failed")? {
                if matches!(k.code, KeyCode::Char('q') | KeyCode::Esc) {
                    break;
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heat_rows_are_powers_of_two() {
        assert_eq!(heat_row(0), 0); // < 1 us
        assert_eq!(heat_row(3), 0); // 3 us -> < 4 us
        assert_eq!(heat_row(4), 1); // 4 us -> < 8 us
        assert_eq!(heat_row(NR_LAT_BUCKETS - 1), HEAT_ROWS - 1);
        assert_eq!(row_label(0), "<  4us");
        assert_eq!(row_label(8), "<  1ms");
    }

    #[test]
    fn heat_column_marks_percentiles() {
        let mut lat = vec![0u64; NR_LAT_BUCKETS];
        lat[1] = 90; // 1 us
        lat[40] = 10; // ~1-2 ms
        let c = heat_col(&lat);
        assert_eq!(c.rows.iter().sum::<u64>(), 100);
        assert_eq!(c.p50_row, 0);
        assert!(c.p99_row > 6, "{}", c.p99_row);
    }

    #[test]
    fn view_renders_into_a_buffer() {
        use ratatui::backend::TestBackend;
        let mk = |ts: u64, k: u64| {
            let s = Sample {
                per_cpu: vec![vec![k; crate::stats::NR_STATS]; 4],
                lat: vec![k; NR_LAT_BUCKETS],
            };
            let g = Gauges {
                procs: vec![0, 1, 2, 3],
                idle_procs: 1,
                local_queued: vec![3, 0, 1, 0],
                shared_queued: vec![2, 0],
                ..Default::default()
            };
            Metrics::new(ts, &s, &g, &[0, 0, 1, 1])
        };
        let mut v = View::new();
        v.push(&mk(1000, 1), &mk(2000, 5));
        let mut t = ratatui::Terminal::new(TestBackend::new(140, 40)).unwrap();
        t.draw(|f| v.draw(f)).unwrap();
        let text: String = t
            .backend()
            .buffer()
            .content()
            .iter()
            .map(|c| c.symbol())
            .collect();
        for want in [
            "scx_gmp top",
            "P3",
            "node1",
            "dispatch mix",
            "wakeup-to-run latency",
            "SCHED 2000ms",
        ] {
            assert!(text.contains(want), "missing {want}");
        }
    }
}
