//! In-process flow tokens: each flow's rate and concurrency kept in this
//! process, for the embedded default.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;
use xtimer_core::SharedClock;

use crate::flow_tokens::{interval_us, FlowFigures, FlowGrant, FlowTokens, FlowTurn, NODE_TTL_MS};
use crate::Result;

/// One flow's state, as both implementations keep it.
#[derive(Debug, Default)]
pub(crate) struct FlowState {
    /// Theoretical arrival time of the next send, µs.
    tat_us: i64,
    /// Open sends' slots and when each lapses, ms.
    slots: HashMap<String, i64>,
    /// Each node's head, waiting count, and when its report lapses, ms.
    nodes: HashMap<String, (i64, u64, i64)>,
}

impl FlowState {
    fn take(&mut self, turn: &FlowTurn<'_>, now_us: i64) -> FlowGrant {
        let now = now_us.div_euclid(1000);
        self.nodes.retain(|_, (_, _, lapses)| *lapses > now);
        self.slots.retain(|_, lapses| *lapses > now);
        for slot in turn.done {
            self.slots.remove(slot);
        }
        match turn.head_ms {
            Some(head) if turn.waiting > 0 => {
                self.nodes.insert(turn.node.to_owned(), (head, turn.waiting, now + NODE_TTL_MS));
            }
            _ => {
                self.nodes.remove(turn.node);
            }
        }
        if turn.paused || turn.slots.is_empty() {
            return FlowGrant { granted: 0, retry_in_ms: None };
        }
        let interval_us = turn.rate_per_sec.map(interval_us).unwrap_or(0);
        let tolerance_us = interval_us * (i64::from(turn.burst.max(1)) - 1);
        let next_token_ms = |tat_us: i64| {
            let wait_us = (tat_us.max(now_us) - now_us - tolerance_us).max(0);
            Some(((wait_us + 999) / 1000).max(1) as u64)
        };
        // An older fire waits on another node: it goes first.
        let head = turn.head_ms.unwrap_or(i64::MAX);
        if self.nodes.iter().any(|(node, (their, _, _))| node != turn.node && *their < head) {
            let retry = if interval_us > 0 { next_token_ms(self.tat_us) } else { Some(2) };
            return FlowGrant { granted: 0, retry_in_ms: retry.map(|ms| ms.max(2)) };
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
            self.slots.insert(turn.slots[granted].clone(), now + turn.slot_ttl_ms as i64);
            granted += 1;
        }
        FlowGrant { granted, retry_in_ms }
    }

    fn figures(&mut self, now: i64) -> FlowFigures {
        self.nodes.retain(|_, (_, _, lapses)| *lapses > now);
        self.slots.retain(|_, lapses| *lapses > now);
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
        assert_eq!(grant, FlowGrant { granted: 1, retry_in_ms: Some(50) });
        clock.advance(49);
        let grant = tokens.take(&turn("n1", Some(1), &slots[1..], Some(20.0))).await.unwrap();
        assert_eq!(grant, FlowGrant { granted: 0, retry_in_ms: Some(1) });
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
        assert_eq!(tokens.take(&t).await.unwrap(), FlowGrant { granted: 2, retry_in_ms: None });
        assert_eq!(tokens.figures("a", "k").await.unwrap(), FlowFigures { waiting: 1, in_flight: 2 });
        let done = vec!["s0".to_owned()];
        let more = vec!["s2".to_owned()];
        let mut again = turn("n1", Some(1), &more, None);
        again.parallelism = Some(2);
        again.done = &done;
        assert_eq!(tokens.take(&again).await.unwrap().granted, 1);
        again.done = &[];
        assert_eq!(tokens.take(&again).await.unwrap().granted, 0, "s1 and s2 are open");
        clock.advance(10_000);
        assert_eq!(tokens.take(&again).await.unwrap().granted, 1, "lapsed slots free their place");
    }

    #[tokio::test]
    async fn the_oldest_waiting_fire_goes_first_across_nodes_until_its_node_lapses() {
        let clock = Arc::new(ManualClock::new(1_000_000));
        let tokens = MemoryFlowTokens::new(clock.clone());
        let slots = ids(1);
        tokens.take(&turn("n1", Some(100), &[], None)).await.unwrap();
        let newer = tokens.take(&turn("n2", Some(200), &slots, None)).await.unwrap();
        assert_eq!(newer.granted, 0, "n1's fire at 100 is older");
        let older = tokens.take(&turn("n1", Some(100), &slots, None)).await.unwrap();
        assert_eq!(older.granted, 1);
        clock.advance(NODE_TTL_MS);
        assert_eq!(tokens.take(&turn("n2", Some(200), &slots, None)).await.unwrap().granted, 1, "n1 stopped asking");
        let mut paused = turn("n2", Some(200), &slots, None);
        paused.paused = true;
        assert_eq!(tokens.take(&paused).await.unwrap(), FlowGrant { granted: 0, retry_in_ms: None });
    }
}
