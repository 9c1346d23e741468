//! The live view's drawing: renders a `View` into a ratatui frame (header line, one row per
//! CPU, queues and dispatch mix, the latency heat map). Holds no state of its own.

use super::state::{Frame1, HeatCol, View, HEAT_ROWS};
use crate::stats::Report;
use ratatui::layout::{Constraint, Direction, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};
use ratatui::Frame;

pub(super) fn row_label(r: usize) -> String {
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

impl View {
    pub(super) fn draw(&self, f: &mut Frame) {
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
        let ncpu = fr.g.cpu_node.len().max(fr.d.per_cpu.len());
        for c in 0..ncpu {
            let in_procs = fr.g.procs.contains(&c);
            let q = fr.g.local_queued.get(c).copied().unwrap_or(0);
            let filled = ((q as usize * bar_w) / maxq as usize).min(bar_w);
            let busy = r.busy_pct(c);
            let v = fr.d.cpu(c);
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
                    fr.g.cpu_node.get(c).copied().unwrap_or(0),
                    if in_procs { "in" } else { "out" }
                )),
                Span::styled("█".repeat(filled), Style::default().fg(Color::Cyan)),
                Span::raw(format!("{}{q:>3} ", "·".repeat(bar_w - filled))),
                Span::styled(format!("{busy:>5.1}%"), Style::default().fg(busy_color)),
                Span::raw(format!(
                    "  {}/{}/{}/{}",
                    v.disp_local,
                    v.disp_runnext,
                    v.disp_shared + v.disp_fair_tick,
                    v.stolen_tasks
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
        let t = d.total();
        let per_s = |v: u64| v as f64 / fr.interval_s.max(0.001);
        let mix = [
            ("runnext", t.disp_runnext),
            ("local", t.disp_local.saturating_sub(t.disp_runnext)),
            ("shared", t.disp_shared),
            ("fair tick", t.disp_fair_tick),
            ("steal llc", t.disp_steal_llc),
            ("steal node", t.disp_steal_node),
            ("steal remote", t.disp_steal_remote),
            ("direct idle", t.enq_direct_idle),
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
        let l = t.numa_local as f64;
        let rm = t.numa_remote as f64;
        lines.push(Line::from(format!(
            "steals/s {:.0} ({:.0} tasks)  preempt/s {:.0} sysmon + {:.0} slice",
            per_s(t.disp_steal_llc + t.disp_steal_node + t.disp_steal_remote),
            per_s(t.stolen_tasks),
            per_s(t.preempt_sysmon),
            per_s(t.preempt_slice),
        )));
        lines.push(Line::from(format!(
            "NUMA local {:.1}%  cross-node migrations/s {:.0}",
            if l + rm > 0.0 {
                100.0 * l / (l + rm)
            } else {
                100.0
            },
            per_s(t.migrations_node)
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
