//! `scx_gmp top`: a full-screen live view of the running scx_gmp, fed by the stats server.
//! Falls back to the plain line output when stdout is not a terminal. The model is in
//! `state`, the rendering in `draw`; this file holds the terminal and the refresh loop.

mod draw;
mod state;

use crate::metrics::{Format, Metrics};
use anyhow::{Context, Result};
use ratatui::crossterm::event::{self, Event, KeyCode};
use state::View;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

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
    use super::draw::row_label;
    use super::state::*;
    use crate::metrics::tests::varied;
    use crate::stats::*;

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
        let mut v = View::new();
        v.push(&varied(1000, 1), &varied(2000, 5));
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
        // The CPU rows and the summary pane as they were before the counters got named
        // fields (the screen is 140 cells wide).
        let rows: Vec<String> = text
            .chars()
            .collect::<Vec<_>>()
            .chunks(140)
            .map(|r| r.iter().collect())
            .collect();
        let want = [
            "│P0      0   in  ██████··········  3  50.0%  4/8/28/36                             ││  node0: 2                                            │",
            "│P1      0   in  ················  0 100.0%  8/16/56/72                            ││  node1: 7                                            │",
            "│P2      1  out  ██··············  1 100.0%  12/24/84/108                          ││dispatch mix                                          │",
            "│P3      1   in  ██████████······  5 100.0%  16/32/112/144                         ││  runnext        4.9% ▇                               │",
        ];
        assert_eq!(rows[5..9], want);
        let want = [
            "  local          0.0%  ",
            "  shared         7.3% ▇ ",
            "  fair tick      9.8% ▇▇ ",
            "  steal llc     12.2% ▇▇ ",
            "  steal node    14.6% ▇▇▇ ",
            "  steal remote  17.1% ▇▇▇ ",
            "  direct idle   34.1% ▇▇▇▇▇▇▇ ",
            "steals/s 720 (360 tasks)  preempt/s 680 sysmon + 720 s",
            "NUMA local 48.8%  cross-node migrations/s 960 ",
        ];
        for (row, want) in rows[9..18].iter().zip(want) {
            assert!(row.contains(&format!("││{want}")), "{row}");
        }
    }
}
