//! The wait-for graph over tasks (holder ids `uuid:n`): an edge a -> b when a waits
//! for a lock that b holds. Pure: built from what the ledgers and the locks say.
//!
//! Invariants:
//! 1. A task never waits for itself here: an edge a -> a (a stale wait entry of a task
//!    that got its lock meanwhile) is dropped.
//! 2. Each cycle is reported once, starting at its smallest task id, each task with
//!    the lock it waits for (held by the next task, the last's by the first).

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

/// The graph: who waits for which locks, who holds which locks.
#[derive(Clone, Debug, Default)]
pub(crate) struct Graph {
    /// Task -> the locks it waits for.
    pub(crate) waits: BTreeMap<String, BTreeSet<String>>,
    /// Lock -> its holders' tasks.
    pub(crate) holders: BTreeMap<String, BTreeSet<String>>,
}

/// One step of a cycle: `task` waits for `lock`, held by the next step's task.
pub(crate) type Step = (String, String);

impl Graph {
    /// The edges out of `task`: (lock it waits for, a task holding it).
    fn out<'a>(&'a self, task: &'a str) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
        (self.waits.get(task).into_iter().flatten()).flat_map(move |lock| {
            (self.holders.get(lock).into_iter().flatten())
                .filter(move |h| h.as_str() != task)
                .map(move |h| (lock.as_str(), h.as_str()))
        })
    }

    /// The shortest cycle from one of `start` back to one of `start` (the ids of one
    /// task), if any.
    pub(crate) fn cycle_through(&self, start: &BTreeSet<String>) -> Option<Vec<Step>> {
        let mut came: HashMap<&str, (&str, &str)> = HashMap::new();
        let mut queue: VecDeque<&str> = start.iter().map(String::as_str).collect();
        while let Some(at) = queue.pop_front() {
            for (lock, next) in self.out(at) {
                if start.contains(next) {
                    return Some(path(&came, at, (lock, next)));
                }
                if !came.contains_key(next) {
                    came.insert(next, (at, lock));
                    queue.push_back(next);
                }
            }
        }
        None
    }

    /// Every cycle, once each (invariant 2): one per task that starts one, the shortest
    /// through it, skipping those found from a smaller task already.
    pub(crate) fn cycles(&self) -> Vec<Vec<Step>> {
        let mut seen: BTreeSet<Vec<String>> = BTreeSet::new();
        let mut out = Vec::new();
        for task in self.waits.keys() {
            let Some(cycle) = self.cycle_through(&BTreeSet::from([task.clone()])) else {
                continue;
            };
            let cycle = rotate(cycle);
            let mut members: Vec<String> = cycle.iter().map(|(t, _)| t.clone()).collect();
            members.sort();
            if seen.insert(members) {
                out.push(cycle);
            }
        }
        out
    }
}

/// The steps from the start to `at`, then the last edge `(lock, back)` to the start.
fn path(came: &HashMap<&str, (&str, &str)>, at: &str, last: (&str, &str)) -> Vec<Step> {
    let mut steps = vec![(at.to_string(), last.0.to_string())];
    let mut cur = at;
    while let Some((prev, lock)) = came.get(cur) {
        steps.push((prev.to_string(), lock.to_string()));
        cur = prev;
    }
    steps.reverse();
    steps
}

/// The cycle starting at its smallest task.
fn rotate(mut cycle: Vec<Step>) -> Vec<Step> {
    if let Some(i) = (0..cycle.len()).min_by_key(|i| &cycle[*i].0) {
        cycle.rotate_left(i);
    }
    cycle
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(waits: &[(&str, &str)], holds: &[(&str, &str)]) -> Graph {
        let mut g = Graph::default();
        for (t, l) in waits {
            g.waits
                .entry(t.to_string())
                .or_default()
                .insert(l.to_string());
        }
        for (t, l) in holds {
            g.holders
                .entry(l.to_string())
                .or_default()
                .insert(t.to_string());
        }
        g
    }

    fn s(v: &[(&str, &str)]) -> Vec<Step> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn two_tasks_waiting_for_each_other_are_one_cycle() {
        let g = graph(&[("a", "L2"), ("b", "L1")], &[("a", "L1"), ("b", "L2")]);
        assert_eq!(g.cycles(), [s(&[("a", "L2"), ("b", "L1")])]);
        let from_b = g.cycle_through(&BTreeSet::from(["b".to_string()])).unwrap();
        assert_eq!(from_b, s(&[("b", "L1"), ("a", "L2")]));
    }

    #[test]
    fn a_chain_is_not_a_cycle_and_a_self_edge_is_dropped() {
        let g = graph(
            &[("a", "L2"), ("b", "L3"), ("c", "L4")],
            &[("a", "L1"), ("b", "L2"), ("c", "L3"), ("c", "L4")],
        );
        assert!(g.cycles().is_empty());
    }

    #[test]
    fn a_cycle_of_three_is_found_once_with_its_locks_in_order() {
        let g = graph(
            &[("b", "L3"), ("a", "L2"), ("c", "L1"), ("d", "L1")],
            &[("a", "L1"), ("b", "L2"), ("c", "L3")],
        );
        assert_eq!(g.cycles(), [s(&[("a", "L2"), ("b", "L3"), ("c", "L1")])]);
    }

    #[test]
    fn a_task_known_by_several_ids_closes_its_cycle() {
        // Task T holds L1 as u:1 and waits for L2 as its call u:9 (listed under both).
        let g = graph(
            &[("u:1", "L2"), ("u:9", "L2"), ("v:1", "L1")],
            &[("u:1", "L1"), ("v:1", "L2")],
        );
        let start = BTreeSet::from(["u:1".to_string(), "u:9".to_string()]);
        assert_eq!(g.cycle_through(&start).unwrap().len(), 2);
    }
}
