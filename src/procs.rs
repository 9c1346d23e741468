//! The processor set ("procs"): the CPUs scx_gmp dispatches ordinary work to, like Go's
//! GOMAXPROCS. This module turns the user's `--procs` value and the CPU topology into an
//! ordered CPU list, and holds the policy that grows and shrinks the set in `auto` mode.
//!
//! It depends on std only, so it can be tested on its own:
//! `rustc --edition 2021 --test src/procs.rs -o /tmp/procs_test && /tmp/procs_test`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

/// CPU ids in a `--procs` list must be below this.
pub const MAX_CPU_ID: usize = 4096;

/// One online CPU's place in the machine (ids as sysfs gives them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    pub cpu: usize,
    pub core: usize,
    pub llc: usize,
    pub node: usize,
}

/// The user's --procs value.
///
/// Accepted forms:
/// - `all`: every online CPU;
/// - `auto`: start small and let [`AutoProcs`] grow and shrink the set;
/// - a plain positive integer `N`: the first N CPUs in [`compact_order`] (a count, not a CPU
///   id: `--procs 2` means two CPUs);
/// - a CPU list such as `0-3,8,10-11`: exactly those CPUs (ranges inclusive, no whitespace,
///   duplicates merged). A list of a single CPU needs a trailing comma or a range, so it is
///   not read as a count: `5,` or `5-5` means CPU 5.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcsSpec {
    All,
    Auto,
    Count(usize),
    List(Vec<usize>),
}

impl FromStr for ProcsSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.is_empty() {
            return Err("--procs needs a value: all, auto, a CPU count or a CPU list".into());
        }
        if s.chars().any(char::is_whitespace) {
            return Err(format!(
                "'{s}': whitespace is not allowed in a --procs value"
            ));
        }
        match s {
            "all" => return Ok(Self::All),
            "auto" => return Ok(Self::Auto),
            _ => {}
        }
        if is_digits(s) {
            return match s.parse::<usize>() {
                Ok(0) => Err("--procs 0: need at least one CPU".into()),
                Ok(n) => Ok(Self::Count(n)),
                Err(_) => Err(format!("--procs {s}: far more CPUs than any machine has")),
            };
        }
        parse_cpu_list(s).map(Self::List)
    }
}

/// Written back in the form [`ProcsSpec::from_str`] reads, so error messages quote the
/// user's value: `all`, `auto`, `8`, `0-3,8`, `5,` (a one-CPU list keeps its comma).
impl fmt::Display for ProcsSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::All => f.write_str("all"),
            Self::Auto => f.write_str("auto"),
            Self::Count(n) => write!(f, "{n}"),
            Self::List(cpus) => {
                let mut sorted = cpus.clone();
                sorted.sort_unstable();
                sorted.dedup();
                let text = cpulist(&sorted);
                if sorted.len() == 1 {
                    write!(f, "{text},")
                } else {
                    f.write_str(&text)
                }
            }
        }
    }
}

fn is_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// One CPU id: digits only, below [`MAX_CPU_ID`].
fn parse_cpu_id(s: &str) -> Result<usize, String> {
    if !is_digits(s) {
        return Err(format!("'{s}' is not a CPU number"));
    }
    match s.parse::<usize>() {
        Ok(n) if n < MAX_CPU_ID => Ok(n),
        _ => Err(format!(
            "CPU '{s}' is out of range (CPU ids must be below {MAX_CPU_ID})"
        )),
    }
}

/// "0-3,8,10-11" -> [0, 1, 2, 3, 8, 10, 11]. One trailing comma is allowed ("5,").
pub(crate) fn parse_cpu_list(s: &str) -> Result<Vec<usize>, String> {
    let body = s.strip_suffix(',').unwrap_or(s);
    let mut cpus = BTreeSet::new();
    for item in body.split(',') {
        if item.is_empty() {
            return Err(format!("'{s}' has an empty item in its CPU list"));
        }
        match item.split_once('-') {
            None => {
                cpus.insert(parse_cpu_id(item)?);
            }
            Some((a, b)) => {
                if a.is_empty() {
                    return Err(format!("'{item}' is not a CPU range (missing start)"));
                }
                if b.is_empty() {
                    return Err(format!("'{item}' is not a CPU range (missing end)"));
                }
                if b.contains('-') {
                    return Err(format!("'{item}' is not a CPU range (too many '-')"));
                }
                let (start, end) = (parse_cpu_id(a)?, parse_cpu_id(b)?);
                if start > end {
                    return Err(format!("'{item}' is not a CPU range (start > end)"));
                }
                cpus.extend(start..=end);
            }
        }
    }
    Ok(cpus.into_iter().collect())
}

/// Sorted, deduplicated CPU ids as "0-3,8,10-11".
pub fn cpulist(cpus: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        let mut end = start;
        while i + 1 < cpus.len() && cpus[i + 1] == end + 1 {
            i += 1;
            end = cpus[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(",")
}

/// "1 CPU is" / "4 CPUs are".
fn cpus_are(n: usize) -> String {
    if n == 1 {
        "1 CPU is".into()
    } else {
        format!("{n} CPUs are")
    }
}

/// The online CPUs grouped for filling: LLCs (node id, then LLC id, ascending), each LLC a
/// list of physical cores (ordered by their lowest CPU id), each core its CPUs ascending.
/// A core is identified by (node, llc, core): Linux core ids repeat across packages.
/// A CPU listed twice in `places` counts once.
fn llc_cores(places: &[Place]) -> Vec<Vec<Vec<usize>>> {
    let mut seen = BTreeSet::new();
    let mut llcs: BTreeMap<(usize, usize), BTreeMap<usize, Vec<usize>>> = BTreeMap::new();
    for p in places {
        if seen.insert(p.cpu) {
            llcs.entry((p.node, p.llc))
                .or_default()
                .entry(p.core)
                .or_default()
                .push(p.cpu);
        }
    }
    llcs.into_values()
        .map(|cores| {
            let mut cores: Vec<Vec<usize>> = cores
                .into_values()
                .map(|mut cpus| {
                    cpus.sort_unstable();
                    cpus
                })
                .collect();
            cores.sort_unstable_by_key(|cpus| cpus[0]);
            cores
        })
        .collect()
}

/// Compact fill order: node by node (ascending node id), within a node LLC by LLC (ascending
/// LLC id), within an LLC first one CPU per physical core (the lowest CPU id of each core,
/// cores in ascending order of that CPU id), then the second SMT sibling of each core, then
/// the third, ...
///
/// So a small set stays within one LLC and one node (shared cache, local memory), and uses
/// whole physical cores before SMT siblings (a sibling shares its core's execution units).
pub fn compact_order(places: &[Place]) -> Vec<usize> {
    let mut order = Vec::with_capacity(places.len());
    for cores in llc_cores(places) {
        let depth = cores.iter().map(Vec::len).max().unwrap_or(0);
        for rank in 0..depth {
            order.extend(cores.iter().filter_map(|cpus| cpus.get(rank).copied()));
        }
    }
    order
}

/// The bounds of `auto` mode from `--procs-min` / `--procs-max` and the number of online
/// CPUs: min defaults to 1, max to every online CPU; a max above that is clamped to it.
/// Returns (min, max) with 1 <= min <= max <= online.
pub fn auto_bounds(
    min: Option<usize>,
    max: Option<usize>,
    online: usize,
) -> Result<(usize, usize), String> {
    if online == 0 {
        return Err("no online CPU".into());
    }
    if min == Some(0) {
        return Err("--procs-min 0: need at least one CPU".into());
    }
    if max == Some(0) {
        return Err("--procs-max 0: need at least one CPU".into());
    }
    let lo = min.unwrap_or(1);
    if lo > online {
        return Err(format!(
            "--procs-min {lo}: only {} online",
            cpus_are(online)
        ));
    }
    if let Some(hi) = max {
        if lo > hi {
            return Err(format!("--procs-min {lo} is above --procs-max {hi}"));
        }
    }
    let hi = max.map_or(online, |hi| hi.min(online));
    Ok((lo, hi))
}

/// Resolve a spec to the initial ordered procs list (the first CPUs of which are active).
/// Returns (order, initial_count): `order` is every CPU that may ever be a proc, in the
/// order procs are added; the first `initial_count` are active at start.
///
/// `min` / `max` (`--procs-min` / `--procs-max`) are only valid with [`ProcsSpec::Auto`]; see
/// [`auto_bounds`]. Auto starts with one LLC's physical cores (the first LLC in the order),
/// clamped into [min, max]: enough to run a typical program without spreading it over
/// caches and nodes, and [`AutoProcs`] grows it within a second if that is too few.
pub fn resolve(
    spec: &ProcsSpec,
    places: &[Place],
    min: Option<usize>,
    max: Option<usize>,
) -> Result<(Vec<usize>, usize), String> {
    if places.is_empty() {
        return Err("no online CPU".into());
    }
    if *spec != ProcsSpec::Auto && (min.is_some() || max.is_some()) {
        return Err("--procs-min/--procs-max need --procs auto".into());
    }
    let order = compact_order(places);
    let online = order.len();
    match spec {
        ProcsSpec::All => Ok((order, online)),
        ProcsSpec::Count(0) => Err("--procs 0: need at least one CPU".into()),
        ProcsSpec::Count(n) if *n > online => {
            Err(format!("--procs {n}: only {} online", cpus_are(online)))
        }
        ProcsSpec::Count(n) => Ok((order, *n)),
        ProcsSpec::List(cpus) => {
            if cpus.is_empty() {
                return Err("--procs: the CPU list is empty".into());
            }
            let wanted: BTreeSet<usize> = cpus.iter().copied().collect();
            let present: BTreeSet<usize> = order.iter().copied().collect();
            if let Some(missing) = wanted.difference(&present).next() {
                return Err(format!(
                    "--procs {spec}: CPU {missing} does not exist or is offline"
                ));
            }
            let order: Vec<usize> = order.into_iter().filter(|c| wanted.contains(c)).collect();
            let count = order.len();
            Ok((order, count))
        }
        ProcsSpec::Auto => {
            let (lo, hi) = auto_bounds(min, max, online)?;
            let first_llc_cores = llc_cores(places).first().map_or(1, Vec::len).max(1);
            Ok((order, first_llc_cores.clamp(lo, hi)))
        }
    }
}

/// Utilisation at or above which the active set counts as saturated (with work waiting).
const GROW_BUSY: f64 = 0.9;
/// Target utilisation when shrinking: one proc fewer must still carry the load at this.
const SHRINK_BUSY: f64 = 0.7;
/// Consecutive light intervals before a shrink.
const SHRINK_STREAK: u32 = 3;

/// The `auto` policy. Go's sysmon re-checks GOMAXPROCS; scx_gmp's loader does it once a
/// second in auto mode, feeding each interval to [`AutoProcs::observe`], and sooner (as a
/// fully busy interval) when the BPF sysmon reports 100 ms of saturation.
///
/// - Grow at once when the set is saturated (busy >= 90% of the procs and at least one task
///   waiting): latency suffers for every interval work waits. The step is the number of
///   waiting tasks (rounded up), at least 1, at most doubling the set, capped at max.
/// - Shrink only after 3 consecutive intervals in which one proc fewer could have carried
///   the load at 70% (busy < 0.7 * (cur - 1)) and nothing waited: the gap between 70% and
///   90% and the streak keep the set from flapping. A step removes at most a quarter of the
///   set (at least one), never below what the observed load needs at 70%, never below min.
/// - Any other interval, a grow, and every change start the shrink streak over.
#[derive(Debug, Clone, PartialEq)]
pub struct AutoProcs {
    cur: usize,
    min: usize,
    max: usize,
    light_streak: u32,
}

impl AutoProcs {
    /// `min` is raised to 1 and `max` to `min` if needed; `cur` is clamped into [min, max].
    pub fn new(cur: usize, min: usize, max: usize) -> Self {
        let min = min.max(1);
        let max = max.max(min);
        Self {
            cur: cur.clamp(min, max),
            min,
            max,
            light_streak: 0,
        }
    }

    /// The number of active procs.
    pub fn max(&self) -> usize {
        self.max
    }

    pub fn current(&self) -> usize {
        self.cur
    }

    /// One observation over the last interval: `busy` = CPU-seconds per second the active
    /// procs spent running scheduled tasks (0.0 ..= cur as f64), `waiting` = tasks queued
    /// (runnable, not running) at the end of the interval, or averaged over it.
    /// Returns Some(new_count) when the set should change, None otherwise.
    /// Non-finite or negative inputs count as 0; busy above cur counts as cur.
    pub fn observe(&mut self, busy: f64, waiting: f64) -> Option<usize> {
        let cur = self.cur as f64;
        let busy = sane(busy).min(cur);
        let waiting = sane(waiting);

        if busy >= GROW_BUSY * cur && waiting >= 1.0 {
            self.light_streak = 0;
            if self.cur >= self.max {
                return None;
            }
            // `as` saturates on huge values; the step is capped at cur anyway.
            let step = (waiting.ceil() as usize).min(self.cur).max(1);
            return self.change_to((self.cur + step).min(self.max));
        }

        if self.cur > 1 && busy < SHRINK_BUSY * (cur - 1.0) && waiting < 1.0 {
            self.light_streak += 1;
            if self.light_streak < SHRINK_STREAK {
                return None;
            }
            self.light_streak = 0;
            // The small epsilon keeps float noise (1.4 / 0.7 = 2.0000000000000004) from
            // asking for one proc more than the load needs.
            let needed = ((busy / SHRINK_BUSY) - 1e-9).ceil().max(0.0) as usize;
            let quarter = self.cur - (self.cur / 4).max(1);
            let target = self.min.max(needed).max(quarter);
            return self.change_to(target);
        }

        self.light_streak = 0;
        None
    }

    /// Grow by up to `step` procs, for a reason other than the load (tasks away from their
    /// memory); None at max. Starts the shrink streak over.
    pub fn grow_by(&mut self, step: usize) -> Option<usize> {
        if self.cur >= self.max || step == 0 {
            return None;
        }
        self.change_to(self.cur.saturating_add(step).min(self.max))
    }

    fn change_to(&mut self, target: usize) -> Option<usize> {
        let target = target.clamp(self.min, self.max);
        self.light_streak = 0;
        if target == self.cur {
            return None;
        }
        self.cur = target;
        Some(target)
    }
}

fn sane(x: f64) -> f64 {
    if x.is_finite() && x > 0.0 {
        x
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(cpu: usize, core: usize, llc: usize, node: usize) -> Place {
        Place {
            cpu,
            core,
            llc,
            node,
        }
    }

    /// One node, one LLC, `n` CPUs without SMT.
    fn flat(n: usize) -> Vec<Place> {
        (0..n).map(|c| place(c, c, 0, 0)).collect()
    }

    /// CPUs 0,1 on node 0 / LLC 0, CPUs 2,3 on node 1 / LLC 1 (core ids repeat per node).
    fn two_by_two() -> Vec<Place> {
        vec![
            place(0, 0, 0, 0),
            place(1, 1, 0, 0),
            place(2, 0, 1, 1),
            place(3, 1, 1, 1),
        ]
    }

    /// Intel-style numbering: node0 CPUs 0-3 (cores 0-3) with siblings 8-11, node1 CPUs 4-7
    /// (cores 0-3 again) with siblings 12-15.
    fn smt_two_nodes() -> Vec<Place> {
        (0..16)
            .map(|c| {
                let node = (c / 4) % 2;
                place(c, c % 4, node, node)
            })
            .collect()
    }

    fn spec(s: &str) -> ProcsSpec {
        s.parse().unwrap()
    }

    fn active(spec: &ProcsSpec, places: &[Place]) -> Vec<usize> {
        let (order, n) = resolve(spec, places, None, None).unwrap();
        order[..n].to_vec()
    }

    #[test]
    fn flat_machine() {
        let p = flat(4);
        assert_eq!(compact_order(&p), vec![0, 1, 2, 3]);
        assert_eq!(active(&ProcsSpec::Count(2), &p), vec![0, 1]);
        assert_eq!(
            resolve(&ProcsSpec::Count(2), &p, None, None).unwrap(),
            (vec![0, 1, 2, 3], 2)
        );
        assert_eq!(
            resolve(&ProcsSpec::All, &p, None, None).unwrap(),
            (vec![0, 1, 2, 3], 4)
        );
    }

    #[test]
    fn two_nodes_fill_one_node_first() {
        let p = two_by_two();
        assert_eq!(active(&ProcsSpec::Count(2), &p), vec![0, 1]);
        assert_eq!(active(&ProcsSpec::Count(3), &p), vec![0, 1, 2]);
    }

    #[test]
    fn smt_whole_cores_first_and_core_ids_per_node() {
        let p = smt_two_nodes();
        let want = vec![0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15];
        assert_eq!(compact_order(&p), want);
        // The input order of `places` does not matter.
        let mut rev = p.clone();
        rev.reverse();
        assert_eq!(compact_order(&rev), want);
        assert_eq!(active(&ProcsSpec::Count(4), &p), vec![0, 1, 2, 3]);
        assert_eq!(active(&ProcsSpec::Count(6), &p), vec![0, 1, 2, 3, 8, 9]);
    }

    #[test]
    fn uneven_nodes() {
        let p = vec![
            place(0, 0, 0, 0),
            place(1, 0, 1, 1),
            place(2, 1, 1, 1),
            place(3, 2, 1, 1),
        ];
        assert_eq!(compact_order(&p), vec![0, 1, 2, 3]);
        // Same shape with node 0 listed last in `places`.
        let p = vec![
            place(5, 0, 1, 1),
            place(6, 1, 1, 1),
            place(7, 2, 1, 1),
            place(9, 0, 0, 0),
        ];
        assert_eq!(compact_order(&p), vec![9, 5, 6, 7]);
    }

    #[test]
    fn duplicate_places_count_once() {
        let mut p = flat(2);
        p.push(place(1, 1, 0, 0));
        assert_eq!(compact_order(&p), vec![0, 1]);
        assert_eq!(
            resolve(&ProcsSpec::All, &p, None, None).unwrap(),
            (vec![0, 1], 2)
        );
    }

    #[test]
    fn offline_cpus() {
        let p: Vec<Place> = flat(4).into_iter().filter(|p| p.cpu != 2).collect();
        let err = resolve(&ProcsSpec::List(vec![0, 2]), &p, None, None).unwrap_err();
        assert!(err.contains("CPU 2 "), "{err}");
        assert_eq!(
            resolve(&ProcsSpec::All, &p, None, None).unwrap(),
            (vec![0, 1, 3], 3)
        );
    }

    #[test]
    fn list_with_absent_cpu() {
        let err = resolve(&spec("0-3,9"), &flat(4), None, None).unwrap_err();
        assert_eq!(err, "--procs 0-3,9: CPU 9 does not exist or is offline");
        let err = resolve(&spec("0-4"), &flat(4), None, None).unwrap_err();
        assert_eq!(err, "--procs 0-4: CPU 4 does not exist or is offline");
    }

    #[test]
    fn list_is_taken_in_compact_order() {
        let p = smt_two_nodes();
        assert_eq!(
            resolve(&spec("8,0,4-5"), &p, None, None).unwrap(),
            (vec![0, 8, 4, 5], 4)
        );
        assert_eq!(resolve(&spec("5,"), &p, None, None).unwrap(), (vec![5], 1));
        assert!(resolve(&ProcsSpec::List(vec![]), &p, None, None).is_err());
    }

    #[test]
    fn count_errors() {
        assert_eq!(
            resolve(&ProcsSpec::Count(8), &flat(4), None, None).unwrap_err(),
            "--procs 8: only 4 CPUs are online"
        );
        assert_eq!(
            resolve(&ProcsSpec::Count(2), &flat(1), None, None).unwrap_err(),
            "--procs 2: only 1 CPU is online"
        );
        assert!(resolve(&ProcsSpec::Count(0), &flat(4), None, None).is_err());
        assert_eq!(
            resolve(&ProcsSpec::All, &[], None, None).unwrap_err(),
            "no online CPU"
        );
        assert_eq!(
            resolve(&ProcsSpec::Auto, &[], None, None).unwrap_err(),
            "no online CPU"
        );
    }

    #[test]
    fn parse_ok() {
        assert_eq!(spec("all"), ProcsSpec::All);
        assert_eq!(spec("auto"), ProcsSpec::Auto);
        assert_eq!(spec("3"), ProcsSpec::Count(3));
        assert_eq!(spec("0-3,8"), ProcsSpec::List(vec![0, 1, 2, 3, 8]));
        assert_eq!(spec("5,"), ProcsSpec::List(vec![5]));
        assert_eq!(spec("5-5"), ProcsSpec::List(vec![5]));
        assert_eq!(
            spec("10-11,2,0-2,2"),
            ProcsSpec::List(vec![0, 1, 2, 10, 11])
        );
        assert_eq!(spec("4095,"), ProcsSpec::List(vec![4095]));
    }

    #[test]
    fn parse_errors() {
        let err = |s: &str| s.parse::<ProcsSpec>().unwrap_err();
        assert_eq!(err("3-1"), "'3-1' is not a CPU range (start > end)");
        assert_eq!(err("x"), "'x' is not a CPU number");
        assert_eq!(err("0-3,x"), "'x' is not a CPU number");
        assert_eq!(err("0"), "--procs 0: need at least one CPU");
        assert_eq!(err("1-"), "'1-' is not a CPU range (missing end)");
        assert_eq!(err("-1"), "'-1' is not a CPU range (missing start)");
        assert_eq!(err("1-2-3"), "'1-2-3' is not a CPU range (too many '-')");
        assert!(err("").starts_with("--procs needs a value"));
        assert!(err("0, 1").contains("whitespace"));
        assert!(err(" 3").contains("whitespace"));
        assert!(err(",").contains("empty item"));
        assert!(err("1,,2").contains("empty item"));
        assert!(err("1,2,,").contains("empty item"));
        assert!(err("4096,").contains("out of range"));
        assert!(err("0-99999999999999999999999").contains("out of range"));
        assert!(err("ALL").contains("not a CPU number"));
        assert!(err("+3,").contains("not a CPU number"));
        for e in ["3-1", "x", "1-", "", "0, 1", "4096,"] {
            assert!(!err(e).contains('\n'));
        }
    }

    #[test]
    fn display_round_trips() {
        for s in ["all", "auto", "8", "0-3,8,10-11", "5,", "1,3"] {
            assert_eq!(spec(s).to_string(), s);
            assert_eq!(spec(&spec(s).to_string()), spec(s));
        }
        assert_eq!(spec("5-5").to_string(), "5,");
    }

    #[test]
    fn min_max_need_auto() {
        let p = flat(4);
        let want = "--procs-min/--procs-max need --procs auto";
        assert_eq!(
            resolve(&ProcsSpec::All, &p, Some(1), None).unwrap_err(),
            want
        );
        assert_eq!(
            resolve(&ProcsSpec::Count(2), &p, None, Some(3)).unwrap_err(),
            want
        );
        assert_eq!(
            resolve(&spec("0-1"), &p, Some(1), Some(2)).unwrap_err(),
            want
        );
    }

    #[test]
    fn auto_bounds_and_start() {
        let p = smt_two_nodes();
        // Default start: the first LLC's physical cores.
        assert_eq!(resolve(&ProcsSpec::Auto, &p, None, None).unwrap().1, 4);
        assert_eq!(
            resolve(&ProcsSpec::Auto, &p, None, None).unwrap().0,
            compact_order(&p)
        );
        assert_eq!(resolve(&ProcsSpec::Auto, &p, Some(6), None).unwrap().1, 6);
        assert_eq!(resolve(&ProcsSpec::Auto, &p, None, Some(2)).unwrap().1, 2);
        // max above online is clamped, not an error.
        assert_eq!(
            resolve(&ProcsSpec::Auto, &flat(4), Some(2), Some(64)).unwrap(),
            (vec![0, 1, 2, 3], 4)
        );
        assert_eq!(auto_bounds(None, Some(64), 4).unwrap(), (1, 4));
        assert_eq!(auto_bounds(None, None, 4).unwrap(), (1, 4));
        assert_eq!(
            resolve(&ProcsSpec::Auto, &flat(4), Some(0), None).unwrap_err(),
            "--procs-min 0: need at least one CPU"
        );
        assert_eq!(
            resolve(&ProcsSpec::Auto, &flat(4), Some(4), Some(2)).unwrap_err(),
            "--procs-min 4 is above --procs-max 2"
        );
        assert_eq!(
            resolve(&ProcsSpec::Auto, &flat(4), Some(8), None).unwrap_err(),
            "--procs-min 8: only 4 CPUs are online"
        );
        assert!(resolve(&ProcsSpec::Auto, &flat(4), None, Some(0)).is_err());
        // A single CPU still starts at 1.
        assert_eq!(
            resolve(&ProcsSpec::Auto, &flat(1), None, None).unwrap(),
            (vec![0], 1)
        );
    }

    #[test]
    fn auto_grows_at_once_and_respects_max() {
        let mut a = AutoProcs::new(1, 1, 3);
        assert_eq!(a.observe(1.0, 5.0), Some(2));
        assert_eq!(a.current(), 2);
        // At most doubling: 2 + min(ceil(5), 2) = 4, capped at max 3.
        assert_eq!(a.observe(2.0, 5.0), Some(3));
        assert_eq!(a.observe(3.0, 50.0), None);
        assert_eq!(a.current(), 3);
        // Saturated but nothing waiting: no grow.
        let mut a = AutoProcs::new(4, 1, 16);
        assert_eq!(a.observe(4.0, 0.5), None);
        // Waiting rounds up: 1.2 -> 2.
        assert_eq!(a.observe(3.7, 1.2), Some(6));
        // Busy below 90%: no grow even with work waiting.
        assert_eq!(a.observe(5.0, 10.0), None);
    }

    #[test]
    fn auto_shrinks_after_three_light_intervals() {
        let mut a = AutoProcs::new(4, 1, 8);
        assert_eq!(a.observe(0.0, 0.0), None);
        assert_eq!(a.observe(0.0, 0.0), None);
        // Quarter step: 4 -> 3.
        assert_eq!(a.observe(0.0, 0.0), Some(3));
        // The streak starts over after a change.
        assert_eq!(a.observe(0.0, 0.0), None);
        assert_eq!(a.observe(0.0, 0.0), None);
        assert_eq!(a.observe(0.0, 0.0), Some(2));
    }

    #[test]
    fn busy_interval_resets_the_streak() {
        let mut a = AutoProcs::new(4, 1, 8);
        assert_eq!(a.observe(0.5, 0.0), None);
        assert_eq!(a.observe(0.5, 0.0), None);
        // Neither grow nor shrink (busy 2.5 >= 0.7 * 3).
        assert_eq!(a.observe(2.5, 0.0), None);
        assert_eq!(a.observe(0.5, 0.0), None);
        assert_eq!(a.observe(0.5, 0.0), None);
        assert_eq!(a.observe(0.5, 0.0), Some(3));
        // Work waiting also breaks a light streak.
        let mut a = AutoProcs::new(4, 1, 8);
        assert_eq!(a.observe(0.5, 0.0), None);
        assert_eq!(a.observe(0.5, 0.0), None);
        assert_eq!(a.observe(0.5, 2.0), None);
        assert_eq!(a.observe(0.5, 0.0), None);
        assert_eq!(a.observe(0.5, 0.0), None);
        assert_eq!(a.observe(0.5, 0.0), Some(3));
        // And so does a grow.
        let mut a = AutoProcs::new(4, 1, 8);
        assert_eq!(a.observe(0.5, 0.0), None);
        assert_eq!(a.observe(0.5, 0.0), None);
        assert_eq!(a.observe(4.0, 1.0), Some(5));
        assert_eq!(a.observe(0.5, 0.0), None);
        assert_eq!(a.observe(0.5, 0.0), None);
        assert_eq!(a.observe(0.5, 0.0), Some(4));
    }

    /// A fresh set of `cur` procs in `min..=max` that sees SHRINK_STREAK intervals of `busy`
    /// CPUs with nothing waiting: the first ones change nothing; what the last one returns.
    fn after_light_streak(cur: usize, min: usize, max: usize, busy: f64) -> Option<usize> {
        let mut a = AutoProcs::new(cur, min, max);
        for _ in 1..SHRINK_STREAK {
            assert_eq!(a.observe(busy, 0.0), None);
        }
        a.observe(busy, 0.0)
    }

    #[test]
    fn shrink_bounds() {
        // Quarter step from 16: 16 -> 12.
        assert_eq!(after_light_streak(16, 1, 16, 0.0), Some(12));
        // Never below what the load needs at 70%: ceil(10 / 0.7) = 15.
        assert_eq!(after_light_streak(16, 1, 16, 10.0), Some(15));
        // Exact multiples of 0.7 are not rounded up by float noise: 1.4 / 0.7 -> 2, so the
        // quarter step decides.
        assert_eq!(after_light_streak(4, 1, 8, 1.4), Some(3));
        assert_eq!(after_light_streak(8, 1, 8, 1.4), Some(6));
        // Never below min, however long the machine stays idle.
        assert_eq!(after_light_streak(4, 3, 8, 0.0), Some(3));
        // A set at its min, and one proc, never shrink.
        for (cur, min) in [(3, 3), (1, 1)] {
            let mut a = AutoProcs::new(cur, min, 8);
            for _ in 0..10 {
                assert_eq!(a.observe(0.0, 0.0), None);
            }
            assert_eq!(a.current(), cur);
        }
    }

    #[test]
    fn new_normalises_bounds() {
        assert_eq!(AutoProcs::new(0, 0, 0).current(), 1);
        assert_eq!(AutoProcs::new(10, 1, 4).current(), 4);
        assert_eq!(AutoProcs::new(1, 3, 8).current(), 3);
    }

    #[test]
    fn bad_inputs_do_not_panic() {
        let mut a = AutoProcs::new(4, 1, 8);
        assert_eq!(a.observe(f64::NAN, f64::NAN), None);
        assert_eq!(a.observe(f64::INFINITY, f64::INFINITY), None);
        assert_eq!(a.observe(-3.0, -1.0), Some(3));
        assert_eq!(a.current(), 3);
        // Huge but finite waiting: the step is capped at doubling and at max.
        let mut a = AutoProcs::new(2, 1, 64);
        assert_eq!(a.observe(2.0, 1e300), Some(4));
        // busy above cur counts as cur.
        assert_eq!(a.observe(100.0, 1.0), Some(5));
    }
}
