//! How [`UcpWorker`] makes its endpoint: the parameters of `-e` (peer
//! error mode and a handler that records the failure).

use super::UcpWorker;
use crate::perf::error::{PerfError, Result};
use rucx_ucp::{EpParams, ErrMode};
use std::sync::{Arc, Mutex};

/// The failure the endpoint's error handler saw, if it ran.
type Reported = Arc<Mutex<Option<String>>>;

/// Endpoint settings and the state of their making.
#[derive(Debug, Default)]
pub(super) struct EpSetup {
    /// Set by `-e`: endpoints get peer error mode and a handler that
    /// writes here.
    reported: Option<Reported>,
}

impl EpSetup {
    /// Parameters of the next endpoint.
    fn params(&self) -> EpParams {
        match &self.reported {
            None => EpParams::new(),
            Some(reported) => {
                let reported = Arc::clone(reported);
                EpParams::new()
                    .err_mode(ErrMode::Peer)
                    .on_error(move |_, _, e| {
                        if let Ok(mut r) = reported.lock() {
                            r.get_or_insert_with(|| e.to_string());
                        }
                    })
            }
        }
    }

    /// The failure the error handler reported, if it ran.
    #[inline]
    pub(super) fn reported(&self) -> Result<()> {
        let Some(reported) = &self.reported else {
            return Ok(());
        };
        match reported.lock().ok().and_then(|r| r.clone()) {
            None => Ok(()),
            Some(e) => Err(PerfError::PeerGone(format!(
                "the endpoint's error handler reported: {e}"
            ))),
        }
    }
}

impl UcpWorker {
    /// Endpoints made from now on are in peer error mode with a handler.
    pub(super) fn enable_err_handling_impl(&mut self) {
        self.setup.reported.get_or_insert_with(Reported::default);
    }

    /// The endpoint to the worker with address `remote`, made with the
    /// settings.
    pub(super) fn connect_impl(&mut self, remote: &[u8]) -> Result<()> {
        let made = match self.setup.reported {
            None => self.worker.connect(remote),
            Some(_) => self.worker.connect_with(remote, self.setup.params()),
        };
        let ep = made.map_err(|e| PerfError::transport("connect to the peer's worker", e))?;
        self.ep = Some(ep);
        Ok(())
    }
}
