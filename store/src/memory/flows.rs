//! In-process flow tokens: each flow's rate and concurrency kept in this
//! process, for the embedded default.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;
use xtimer_core::SharedClock;

use crate::flow_tokens::{interval_us, FlowFigures, FlowGrant, FlowTokens, FlowTurn, NODE_TTL_MS};
use crate::Result;

/// The head a node reports when none of its fires waits: newer than any
/// fire, so it never goes before one (the Redis script stores the same).
pub(crate) const NO_HEAD: i64 = (1 << 53) - 1;

/// One flow's state, as both implementations keep it.
#[derive(Debug, Default)]
pub(crate) struct FlowState {
    /// Theoretical arrival time of the next send, µs.
    tat_us: i64,
    /// Open sends' slots: the node holding each and when it lapses, ms.
    slots: HashMap<String, (String, i64)>,
    /// Each node's report: its head ([`NO_HEAD`]: none waits), waiting
    /// count, and when the report lapses, ms.
    nodes: HashMap<String, (i64, u64, i64)>,
}

impl FlowState {
    /// Forgets lapsed reports, the slots of their nodes (dead) and lapsed slots.
    fn sweep(&mut self, now: i64) {
        let mut dead = Vec::new();
        self.nodes.retain(|node, (_, _, lapses)| {
            let alive = *lapses > now;
            if !alive {
                dead.push(node.clone());
            }
            alive
        });
        self.slots.retain(|_, (node, lapses)| *lapses > now && !dead.contains(node));
    }

    fn take(&mut self, turn: &FlowTurn<'_>, now_us: i64) -> FlowGrant {
        let now = now_us.div_euclid(1000);
        self.sweep(now);
        for slot in turn.done {
            self.slots.remove(slot);
        }
        let head = turn.head_ms.filter(|_| turn.waiting > 0);
        let report = (head.unwrap_or(NO_HEAD), turn.waiting, now + NODE_TTL_MS);
        if head.is_some() || turn.holding > 0 {
            self.nodes.insert(turn.node.to_owned(), report);
        } else {
            self.nodes.remove(turn.node);
        }
        let refused = |retry_in_ms, behind| FlowGrant { granted: 0, retry_in_ms, behind };
        if turn.paused || turn.slots.is_empty() {
            return refused(None, false);
        }
        let interval_us = turn.rate_per_sec.map(interval_us).unwrap_or(0);
        let tolerance_us = interval_us * (i64::from(turn.burst.max(1)) - 1);
        let next_token_ms = |tat_us: i64| {
            let wait_us = (tat_us.max(now_us) - now_us - tolerance_us).max(0);
            Some(((wait_us + 999) / 1000).max(1) as u64)
        };
        // An older fire waits on another node: it goes first.
        let head = head.unwrap_or(NO_HEAD);
        if self.nodes.iter().any(|(node, (their, _, _))| node != turn.node && *their < head) {
            return refused(if interval_us > 0 { next_token_ms(self.tat_us) } else { None }, true);
        }
        let room = match turn.parallelism {
            Some(cap) => (cap as usize).saturating_sub(self.slots.len()),
            None => usize::MAX,
        };
        let mut granted = 0;
        let mut retry_in_ms = None;
        while granted < turn.slots.len() {
            if granted >= room {
                break;
            }
            if interval_us > 0 {
                let from = self.tat_us.max(now_us);
                if from - now_us > tolerance_us {
                    retry_in_ms = next_token_ms(self.tat_us);
                    break;
                }
                self.tat_us = from + interval_us;
            }
            let lapses = now + turn.slot_ttl_ms as i64;
            self.slots.insert(turn.slots[granted].clone(), (turn.node.to_owned(), lapses));
            granted += 1;
        }
        if granted > 0 {
            // It holds slots now: its report stays alive with them.
            self.nodes.insert(turn.node.to_owned(), report);
        }
        FlowGrant { granted, retry_in_ms, behind: false }
    }

    fn figures(&mut self, now: i64) -> FlowFigures {
        self.sweep(now);
        FlowFigures {
            waiting: self.nodes.values().map(|(_, waiting, _)| waiting).sum(),
            in_flight: self.slots.len() as u64,
        }
    }
}

/// Every flow's state in this process, for one embedded node.
pub struct MemoryFlowTokens {
    clock: SharedClock,
    flows: Mutex<HashMap<(String, String), FlowState>>,
}

impl MemoryFlowTokens {
    /// Empty state on the node's clock.
    pub fn new(clock: SharedClock) -> Self {
        Self { clock, flows: Mutex::new(HashMap::new()) }
    }
}

#[async_trait]
impl FlowTokens for MemoryFlowTokens {
    async fn take(&self, turn: &FlowTurn<'_>) -> Result<FlowGrant> {
        let now_us = self.clock.now_ms() * 1000;
        let mut flows = self.flows.lock().expect("flow tokens");
        let flow = flows.entry((turn.app.to_owned(), turn.key.to_owned())).or_default();
        Ok(flow.take(turn, now_us))
    }

    async fn figures(&self, app: &str, key: &str) -> Result<FlowFigures> {
        let now = self.clock.now_ms();
        let mut flows = self.flows.lock().expect("flow tokens");
        Ok(flows.get_mut(&(app.to_owned(), key.to_owned())).map(|f| f.figures(now)).unwrap_or_default())
    }

    async fn forget(&self, app: &str, key: &str) -> Result<()> {
        self.flows.lock().expect("flow tokens").remove(&(app.to_owned(), key.to_owned()));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use xtimer_core::clock::ManualClock;

    use super::*;

    fn turn<'a>(node: &'a str, head: Option<i64>, slots: &'a [String], rate: Option<f64>) -> FlowTurn<'a> {
        FlowTurn {
            app: "a",
            key: "k",
            node,
            head_ms: head,
            waiting: u64::from(head.is_some()),
            rate_per_sec: rate,
            burst: 1,
            parallelism: None,
            paused: false,
            slots,
            done: &[],
            holding: 0,
            slot_ttl_ms: 10_000,
        }
    }

    fn ids(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("s{i}")).collect()
    }

    #[tokio::test]
    async fn a_rate_spaces_sends_by_its_interval() {
        let clock = Arc::new(ManualClock::new(1_000_000));
        let tokens = MemoryFlowTokens::new(clock.clone());
        let slots = ids(5);
        let grant = tokens.take(&turn("n1", Some(1), &slots, Some(20.0))).await.unwrap();
        assert_eq!(grant, FlowGrant { granted: 1, retry_in_ms: Some(50), behind: false });
        clock.advance(49);
        let grant = tokens.take(&turn("n1", Some(1), &slots[1..], Some(20.0))).await.unwrap();
        assert_eq!(grant, FlowGrant { granted: 0, retry_in_ms: Some(1), behind: false });
        clock.advance(1);
        let grant = tokens.take(&turn("n1", Some(1), &slots[1..], Some(20.0))).await.unwrap();
        assert_eq!(grant.granted, 1);
        // Over any one second: at most rate + 1.
        let mut sent = 2;
        for _ in 0..1_000 {
            clock.advance(1);
            sent += tokens.take(&turn("n1", Some(1), &slots[..1], Some(20.0))).await.unwrap().granted;
        }
        assert_eq!(sent, 2 + 20);
    }

    #[tokio::test]
    async fn parallelism_counts_open_slots_until_given_back_or_lapsed() {
        let clock = Arc::new(ManualClock::new(1_000_000));
        let tokens = MemoryFlowTokens::new(clock.clone());
        let slots = ids(3);
        let mut t = turn("n1", Some(1), &slots, None);
        t.parallelism = Some(2);
        assert_eq!(tokens.take(&t).await.unwrap(), FlowGrant { granted: 2, retry_in_ms: None, behind: false });
        assert_eq!(tokens.figures("a", "k").await.unwrap(), FlowFigures { waiting: 1, in_flight: 2 });
        let done = vec!["s0".to_owned()];
        let more = vec!["s2".to_owned()];
        let mut again = turn("n1", Some(1), &more, None);
        again.parallelism = Some(2);
        again.done = &done;
        assert_eq!(tokens.take(&again).await.unwrap().granted, 1);
        again.done = &[];
        assert_eq!(tokens.take(&again).await.unwrap().granted, 0, "s1 and s2 are open");
        // n1 asks every second (alive): its slots last their TTL, 10 s.
        for _ in 1..10 {
            clock.advance(1_000);
            assert_eq!(tokens.take(&again).await.unwrap().granted, 0, "s1 and s2 are open");
        }
        clock.advance(1_000);
        assert_eq!(tokens.take(&again).await.unwrap().granted, 1, "lapsed slots free their place");
    }

    #[tokio::test]
    async fn the_oldest_waiting_fire_goes_first_across_nodes_until_its_node_lapses() {
        let clock = Arc::new(ManualClock::new(1_000_000));
        let tokens = MemoryFlowTokens::new(clock.clone());
        let slots = ids(1);
        tokens.take(&turn("n1", Some(100), &[], None)).await.unwrap();
        let newer = tokens.take(&turn("n2", Some(200), &slots, None)).await.unwrap();
        assert_eq!(newer, FlowGrant { granted: 0, retry_in_ms: None, behind: true }, "n1's fire at 100 is older");
        let older = tokens.take(&turn("n1", Some(100), &slots, None)).await.unwrap();
        assert_eq!(older.granted, 1);
        clock.advance(NODE_TTL_MS);
        assert_eq!(tokens.take(&turn("n2", Some(200), &slots, None)).await.unwrap().granted, 1, "n1 stopped asking");
        let mut paused = turn("n2", Some(200), &slots, None);
        paused.paused = true;
        assert_eq!(tokens.take(&paused).await.unwrap(), FlowGrant { granted: 0, retry_in_ms: None, behind: false });
    }

    #[tokio::test]
    async fn a_silent_nodes_slots_are_freed_when_its_report_lapses_not_at_their_ttl() {
        let clock = Arc::new(ManualClock::new(1_000_000));
        let tokens = MemoryFlowTokens::new(clock.clone());
        let (mine, theirs) = (vec!["n1:0".to_owned()], vec!["n2:0".to_owned()]);
        let mut n1 = turn("n1", Some(1), &mine, None);
        n1.parallelism = Some(1);
        n1.slot_ttl_ms = 60_000;
        assert_eq!(tokens.take(&n1).await.unwrap().granted, 1);
        // n1 keeps its report alive while it holds the slot, nothing waiting.
        let mut renew = turn("n1", None, &[], None);
        renew.parallelism = Some(1);
        renew.holding = 1;
        let mut n2 = turn("n2", Some(2), &theirs, None);
        n2.parallelism = Some(1);
        for _ in 0..10 {
            clock.advance(1_000);
            tokens.take(&renew).await.unwrap();
            let refused = tokens.take(&n2).await.unwrap();
            assert_eq!(
                refused,
                FlowGrant { granted: 0, retry_in_ms: None, behind: false },
                "n1 is alive: its slot holds"
            );
        }
        assert_eq!(tokens.figures("a", "k").await.unwrap(), FlowFigures { waiting: 1, in_flight: 1 });
        // n1 dies: within its report's TTL its slot is free, 50 s before the slot's own.
        clock.advance(NODE_TTL_MS - 1);
        assert_eq!(tokens.take(&n2).await.unwrap().granted, 0, "not dead yet");
        clock.advance(1);
        assert_eq!(tokens.figures("a", "k").await.unwrap(), FlowFigures { waiting: 1, in_flight: 0 });
        assert_eq!(tokens.take(&n2).await.unwrap().granted, 1, "n1 is dead: its slot is freed");
        // A node that reports holding nothing keeps no report: its slot ended.
        let done = theirs.clone();
        let mut ended = turn("n2", None, &[], None);
        ended.done = &done;
        tokens.take(&ended).await.unwrap();
        assert_eq!(tokens.figures("a", "k").await.unwrap(), FlowFigures::default());
    }
}
