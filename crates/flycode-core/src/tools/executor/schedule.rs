//! What may run together: read-only calls at once, every other call alone
//! (PROTOCOL.md §13 (The API loop: parallel calls), §14 (The MCP server)). One rule for every
//! door: `flycode run` plans a turn's calls with [`runs`]; `flycode mcp`'s concurrent requests
//! pass a [`Gate`].

use std::ops::Range;

use crate::protocol::ToolName;
use crate::tools::registry;

/// How a call may run beside others.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallClass {
    /// It only reads: it runs beside other reads.
    ReadOnly,
    /// It writes, runs a program or changes the session's notes: it runs alone.
    Exclusive,
}

impl CallClass {
    /// The class of a call of `tool`, as the tool describes itself (its approval class).
    pub fn of(tool: ToolName) -> CallClass {
        if registry::is_read_only(tool) {
            CallClass::ReadOnly
        } else {
            CallClass::Exclusive
        }
    }
}

/// The order to run a sequence of calls in (a turn's): each maximal run of consecutive
/// read-only calls as one range, to run at once, every other call as a range of its own.
pub fn runs(classes: &[CallClass]) -> Vec<Range<usize>> {
    let mut runs = Vec::new();
    let mut start = 0;
    while start < classes.len() {
        let mut end = start + 1;
        if classes[start] == CallClass::ReadOnly {
            while end < classes.len() && classes[end] == CallClass::ReadOnly {
                end += 1;
            }
        }
        runs.push(start..end);
        start = end;
    }
    runs
}

/// The way in for calls that arrive concurrently (an MCP server's requests): read-only calls
/// pass together; every other call waits until the calls running have ended, and runs alone.
/// Calls pass in the order they arrive (a waiting exclusive call holds up the reads behind it),
/// so no call waits for ever.
#[derive(Debug, Default)]
pub struct Gate {
    lock: tokio::sync::RwLock<()>,
}

/// A call's passage through the [`Gate`]: others wait on it while it is held.
#[derive(Debug)]
pub enum Pass<'g> {
    /// Beside other reads.
    Shared(tokio::sync::RwLockReadGuard<'g, ()>),
    /// Alone.
    Alone(tokio::sync::RwLockWriteGuard<'g, ()>),
}

impl Gate {
    /// Waits for the call's turn: at once for a read while only reads run, once everything
    /// before it ended for any other call.
    pub async fn enter(&self, class: CallClass) -> Pass<'_> {
        match class {
            CallClass::ReadOnly => Pass::Shared(self.lock.read().await),
            CallClass::Exclusive => Pass::Alone(self.lock.write().await),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn reads_run_together_and_every_other_call_alone() {
        let (r, w) = (CallClass::ReadOnly, CallClass::Exclusive);
        assert_eq!(
            runs(&[r, r, w, r, w, w, r, r, r]),
            vec![0..2, 2..3, 3..4, 4..5, 5..6, 6..9]
        );
        assert_eq!(runs(&[]), Vec::<Range<usize>>::new());
        assert_eq!(runs(&[w]), vec![0..1]);
    }

    #[test]
    fn the_class_is_the_tools_own() {
        assert_eq!(CallClass::of(ToolName::FsRead), CallClass::ReadOnly);
        assert_eq!(CallClass::of(ToolName::AgentTask), CallClass::ReadOnly);
        for tool in [
            ToolName::FsWrite,
            ToolName::ProcessRun,
            ToolName::FsRm,
            ToolName::AgentNote,
        ] {
            assert_eq!(CallClass::of(tool), CallClass::Exclusive, "{tool}");
        }
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
    }

    /// Whether `entering` passes the gate while the other pass is held: polled once, no clock.
    fn passes_beside(held: CallClass, entering: CallClass) -> bool {
        runtime().block_on(async {
            let gate = Gate::default();
            let _running = gate.enter(held).await;
            let entered = gate.enter(entering);
            tokio::pin!(entered);
            futures_now(entered.as_mut()).is_some()
        })
    }

    /// The future's output if it is ready at its first poll.
    fn futures_now<F: std::future::Future + Unpin>(future: F) -> Option<F::Output> {
        let waker = std::task::Waker::noop();
        let mut context = std::task::Context::from_waker(waker);
        let mut future = future;
        match std::pin::Pin::new(&mut future).poll(&mut context) {
            std::task::Poll::Ready(output) => Some(output),
            std::task::Poll::Pending => None,
        }
    }

    #[test]
    fn a_read_is_not_held_up_by_a_running_read() {
        assert!(passes_beside(CallClass::ReadOnly, CallClass::ReadOnly));
    }

    #[test]
    fn a_write_waits_for_a_running_read_and_everything_waits_for_a_write() {
        assert!(!passes_beside(CallClass::ReadOnly, CallClass::Exclusive));
        assert!(!passes_beside(CallClass::Exclusive, CallClass::ReadOnly));
        assert!(!passes_beside(CallClass::Exclusive, CallClass::Exclusive));
    }

    #[test]
    fn a_waiting_write_enters_once_the_read_ends() {
        runtime().block_on(async {
            let gate = Gate::default();
            let running = gate.enter(CallClass::ReadOnly).await;
            let entered = gate.enter(CallClass::Exclusive);
            tokio::pin!(entered);
            assert!(futures_now(entered.as_mut()).is_none());
            drop(running);
            let pass = tokio::time::timeout(Duration::from_secs(10), entered)
                .await
                .unwrap();
            assert!(matches!(pass, Pass::Alone(_)));
        });
    }
}
