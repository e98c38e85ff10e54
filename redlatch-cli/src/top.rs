//! `redlatch top [PATTERN]`: a live view of the listing (`redlatch list`), refreshed
//! every second: held locks, who holds them (app, host), for how long, lease left,
//! waiters (each redlatch waiter on a row of its own: pid, app, host, how long it has
//! waited) and hand-overs per second (holder changes between snapshots); sort keys in
//! the footer, `q` quits.

use std::collections::{HashMap, VecDeque};
use std::io::Stdout;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Args;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::crossterm::{execute, terminal};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Row, Table};
use ratatui::{Frame, Terminal, TerminalOptions, Viewport};
use redlatch::{Listing, LockListing};
use tokio::sync::mpsc;

use crate::conn::{self, RedisArgs};
use crate::duration::{self, human};
use crate::exit::{self, Failure};
use crate::list::{ago, now_ms};

#[derive(Args, Debug)]
pub struct TopArgs {
    /// Glob of the names to show, as Redis SCAN MATCH (`orders:*`).
    #[arg(default_value = "*")]
    pub pattern: String,

    /// Time between refreshes.
    #[arg(long, default_value = "1s", value_parser = duration::parse)]
    pub interval: Duration,

    #[command(flatten)]
    pub redis: RedisArgs,
}

/// The orders rows can be sorted in, each with its key.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Sort {
    Name,
    Age,
    Ttl,
    Waiters,
    Handovers,
}

/// The footer: every key.
const KEYS: &str = "q quit  n name  a age  t ttl  w waiters  h hand-overs/s  r reverse";

/// The size drawn on a terminal that reports none: columns, rows.
const FALLBACK: (u16, u16) = (80, 24);

/// Hand-overs are counted over the snapshots of this long a window.
const WINDOW: Duration = Duration::from_secs(10);

pub async fn run(args: TopArgs) -> ExitCode {
    match execute(&args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => failure.report(),
    }
}

async fn execute(args: &TopArgs) -> Result<(), Failure> {
    let client = conn::connect(conn::for_queries(args.redis.config()?)).await?;
    let mut term = Screen::open()?;
    let keys = read_keys();
    let result = show(&client, args, &mut term.0, keys).await;
    drop(term);
    result
}

/// The terminal in raw mode on the alternate screen, given back on drop.
struct Screen(Terminal<CrosstermBackend<Stdout>>);

impl Screen {
    fn open() -> Result<Screen, Failure> {
        let fail = |e: std::io::Error| Failure::new(exit::INTERNAL, format!("terminal: {e}"));
        terminal::enable_raw_mode().map_err(fail)?;
        let mut stdout = std::io::stdout();
        execute!(stdout, terminal::EnterAlternateScreen).map_err(fail)?;
        let backend = CrosstermBackend::new(stdout);
        // A terminal that reports no size (a pseudo-terminal nobody sized: 0x0, or an
        // error) gets the classic 80x24, as `top(1)` does, instead of an empty screen.
        let sized = terminal::size().is_ok_and(|(cols, rows)| cols > 0 && rows > 0);
        let term = if sized {
            Terminal::new(backend)
        } else {
            let viewport = Viewport::Fixed(Rect::new(0, 0, FALLBACK.0, FALLBACK.1));
            Terminal::with_options(backend, TerminalOptions { viewport })
        };
        term.map(Screen).map_err(fail)
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        let _ = execute!(self.0.backend_mut(), terminal::LeaveAlternateScreen);
        let _ = terminal::disable_raw_mode();
        let _ = self.0.show_cursor();
    }
}

/// Key presses, read on a thread of their own (reading the terminal blocks).
fn read_keys() -> mpsc::UnboundedReceiver<(KeyCode, KeyModifiers)> {
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::spawn(move || loop {
        match event::read() {
            Ok(Event::Key(k)) if k.kind != KeyEventKind::Release => {
                if tx.send((k.code, k.modifiers)).is_err() {
                    return;
                }
            }
            Ok(_) => {}
            Err(_) => return,
        }
    });
    rx
}

/// What the view shows and remembers between refreshes.
struct View {
    pattern: String,
    sort: Sort,
    reverse: bool,
    listing: Option<Listing>,
    error: Option<String>,
    /// Recent snapshots: when, and each name's holders.
    history: VecDeque<(Instant, HashMap<String, Vec<String>>)>,
}

async fn show(
    client: &redlatch::Client,
    args: &TopArgs,
    term: &mut Terminal<CrosstermBackend<Stdout>>,
    mut keys: mpsc::UnboundedReceiver<(KeyCode, KeyModifiers)>,
) -> Result<(), Failure> {
    let mut view = View {
        pattern: args.pattern.clone(),
        sort: Sort::Name,
        reverse: false,
        listing: None,
        error: None,
        history: VecDeque::new(),
    };
    let mut tick = tokio::time::interval(args.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let fail = |e: std::io::Error| Failure::new(exit::INTERNAL, format!("terminal: {e}"));
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let listing = client.list_within(&view.pattern, args.interval.max(Duration::from_secs(1))).await;
                view.update(listing);
            }
            key = keys.recv() => match key {
                None => return Ok(()),
                Some((KeyCode::Char('q') | KeyCode::Esc, _)) => return Ok(()),
                Some((KeyCode::Char('c'), m)) if m.contains(KeyModifiers::CONTROL) => return Ok(()),
                Some((KeyCode::Char(c), _)) => view.key(c),
                Some(_) => {}
            },
        }
        term.draw(|f| view.draw(f)).map_err(fail)?;
    }
}

impl View {
    fn update(&mut self, listing: redlatch::Result<Listing>) {
        match listing {
            Ok(l) => {
                let now = Instant::now();
                let holders = (l.locks.iter())
                    .map(|x| {
                        (
                            x.name.clone(),
                            x.holders.iter().map(|h| h.holder.id.clone()).collect(),
                        )
                    })
                    .collect();
                self.history.push_back((now, holders));
                while self
                    .history
                    .front()
                    .is_some_and(|(at, _)| now - *at > WINDOW)
                {
                    self.history.pop_front();
                }
                self.listing = Some(l);
                self.error = None;
            }
            Err(e) => self.error = Some(e.to_string()),
        }
    }

    fn key(&mut self, c: char) {
        self.sort = match c {
            'n' => Sort::Name,
            'a' => Sort::Age,
            't' => Sort::Ttl,
            'w' => Sort::Waiters,
            'h' => Sort::Handovers,
            'r' => {
                self.reverse = !self.reverse;
                self.sort
            }
            _ => self.sort,
        };
    }

    /// Holder changes of `name` per second over the recent snapshots: a snapshot whose
    /// holders differ from the last holders seen (a free lock in between is no change).
    fn handovers(&self, name: &str) -> f64 {
        let mut last: Option<&Vec<String>> = None;
        let mut changes = 0;
        for (_, snapshot) in &self.history {
            match snapshot.get(name) {
                Some(now) if !now.is_empty() => {
                    changes += usize::from(last.is_some_and(|l| l != now));
                    last = Some(now);
                }
                _ => {}
            }
        }
        match (self.history.front(), self.history.back()) {
            (Some(first), Some(last)) if last.0 > first.0 => {
                changes as f64 / (last.0 - first.0).as_secs_f64()
            }
            _ => 0.0,
        }
    }

    fn rows(&self, now: i64) -> Vec<(&LockListing, f64, i64)> {
        let Some(listing) = &self.listing else {
            return vec![];
        };
        let mut rows: Vec<(&LockListing, f64, i64)> = (listing.locks.iter())
            .map(|l| {
                let age = l
                    .holders
                    .iter()
                    .filter_map(|h| h.holder.acquired)
                    .min()
                    .map_or(-1, |s| now - s);
                (l, self.handovers(&l.name), age)
            })
            .collect();
        rows.sort_by(|a, b| match self.sort {
            Sort::Name => a.0.name.cmp(&b.0.name),
            Sort::Age => b.2.cmp(&a.2),
            Sort::Ttl => b.0.ttl.cmp(&a.0.ttl),
            Sort::Waiters => b.0.waiters.cmp(&a.0.waiters),
            Sort::Handovers => b.1.total_cmp(&a.1),
        });
        if self.reverse {
            rows.reverse();
        }
        rows
    }

    fn draw(&self, f: &mut Frame) {
        let [head, body, foot] = Layout::vertical([
            Constraint::Length(1),
            Constraint::Min(1),
            Constraint::Length(1),
        ])
        .areas(f.area());
        let now = now_ms();
        let rows = self.rows(now);
        let state = match (&self.error, &self.listing) {
            (Some(e), _) => format!("error: {e}"),
            (None, Some(l)) if l.incomplete => format!(
                "{} names, INCOMPLETE ({} unread)",
                l.locks.len(),
                l.unread.len()
            ),
            (None, Some(l)) => format!("{} names", l.locks.len()),
            (None, None) => "reading...".into(),
        };
        let title = format!(
            "redlatch top {}  {state}  sort: {:?}{}",
            self.pattern,
            self.sort,
            if self.reverse { " (reversed)" } else { "" }
        );
        f.render_widget(Paragraph::new(Line::from(title)), head);
        let table = Table::new(
            rows.iter().flat_map(|(l, rate, age)| {
                let waiters = l.waiting.iter().map(move |w| waiter_row(w, now));
                std::iter::once(row(l, *rate, *age)).chain(waiters)
            }),
            [
                Constraint::Length(22),
                Constraint::Length(10),
                Constraint::Length(12),
                Constraint::Length(7),
                Constraint::Length(7),
                Constraint::Length(5),
                Constraint::Length(6),
            ],
        )
        .header(
            Row::new(["NAME", "APP", "HOST", "AGE", "TTL", "WAIT", "HO/S"])
                .style(Style::default().add_modifier(Modifier::BOLD)),
        );
        f.render_widget(table, body);
        f.render_widget(Paragraph::new(Line::from(KEYS)), foot);
    }
}

/// One name's row: its first holder's app and host (the holder id where its client left
/// no record, `job` for a scheduled job's), how long it holds, the lease left, waiters and hand-overs per second.
fn row(l: &LockListing, rate: f64, age: i64) -> Row<'static> {
    let first = l.holders.first();
    let first = first.map(|h| &h.holder);
    // A scheduled job's holder (ShedLock's value) names no app: shown as a job.
    let app = first.map_or("-".to_string(), |h| match (&h.app, l.kind) {
        (Some(app), _) => app.clone(),
        (None, redlatch::ListedKind::Job) => "job".into(),
        (None, _) => h.id.clone(),
    });
    let host = first.map_or("-".to_string(), |h| {
        h.host.clone().unwrap_or_else(|| "?".into())
    });
    let age = if age < 0 { "?".to_string() } else { ago(age) };
    let age = if first.is_none() {
        "-".to_string()
    } else {
        age
    };
    Row::new([
        l.name.clone(),
        app,
        host,
        age,
        l.ttl.map_or("-".into(), human),
        l.waiters.to_string(),
        format!("{rate:.1}"),
    ])
}

/// A waiter's row, under its lock's: `└ wait <pid>`, its app and host, how long it
/// has waited (the id where its client left no record).
fn waiter_row(w: &redlatch::QueuedWaiter, now: i64) -> Row<'static> {
    let who = w.pid.map_or_else(|| w.id.clone(), |p| p.to_string());
    let waited = w.waiting_since.map_or("?".to_string(), |s| ago(now - s));
    Row::new([
        format!(" └ wait {who}"),
        w.app.clone().unwrap_or_else(|| "?".into()),
        w.host.clone().unwrap_or_else(|| "?".into()),
        waited,
        String::new(),
        String::new(),
        String::new(),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(snapshots: &[(u64, &[&str])]) -> View {
        let start = Instant::now();
        let history = (snapshots.iter())
            .map(|(ms, holders)| {
                let holders = holders.iter().map(|h| h.to_string()).collect();
                let at = start + Duration::from_millis(*ms);
                (at, HashMap::from([("a".to_string(), holders)]))
            })
            .collect();
        View {
            pattern: "*".into(),
            sort: Sort::Name,
            reverse: false,
            listing: None,
            error: None,
            history,
        }
    }

    /// Hand-overs are holder changes between snapshots, per second of the window; a
    /// lock that frees and is taken again by the same holder is no hand-over.
    #[test]
    fn handovers_are_holder_changes_per_second() {
        let v = view(&[
            (0, &["x:1"]),
            (1000, &["y:1"]),
            (2000, &["x:2"]),
            (4000, &["x:2"]),
        ]);
        assert_eq!(v.handovers("a"), 0.5);
        let v = view(&[(0, &["x:1"]), (1000, &[]), (2000, &["x:1"])]);
        assert_eq!(v.handovers("a"), 0.0);
        let v = view(&[(0, &["x:1"]), (1000, &[]), (2000, &["y:1"])]);
        assert_eq!(v.handovers("a"), 0.5, "freed, then taken by another");
        assert_eq!(view(&[(0, &["x:1"])]).handovers("a"), 0.0);
        assert_eq!(view(&[]).handovers("b"), 0.0);
    }
}
