//! Endpoint error handling, as UCX's `err_mode` and `err_handler` of
//! `ucp_ep_params_t`.
//!
//! An endpoint in peer mode ([`ErrMode::Peer`]) reports its failure (its
//! peer died, its connection broke, a transport refused it): the
//! protocol layer records it once (`Reports::ep_failures`) and the
//! endpoint's handler, if it has one, runs after `progress` has returned,
//! with a [`WorkerMut`] as completion callbacks get it, the endpoint and
//! the error. Whatever the mode, the endpoint's outstanding operations
//! complete with the error and later ones fail at once (rucx leaves none
//! hanging); closing an endpoint ([`Worker::ep_close`]) is no failure and
//! runs no handler.

use super::Worker;
use crate::api::WorkerMut;
pub use crate::request::ErrHandler;
use crate::request::OnError;
use crate::{Ep, Error, Result};

/// How an endpoint's failure is reported (UCX's
/// `ucp_err_handling_mode_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ErrMode {
    /// Not reported: the endpoint's operations fail, no handler runs
    /// (`UCP_ERR_HANDLING_MODE_NONE`).
    #[default]
    None,
    /// Reported once, to the endpoint's handler
    /// (`UCP_ERR_HANDLING_MODE_PEER`).
    Peer,
}

/// How to create an endpoint ([`Worker::connect_with`]); the default is
/// what [`Worker::connect`] does.
#[derive(Default)]
pub struct EpParams {
    err_mode: ErrMode,
    on_error: Option<ErrHandler>,
}

impl std::fmt::Debug for EpParams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EpParams")
            .field("err_mode", &self.err_mode)
            .field("on_error", &self.on_error.is_some())
            .finish()
    }
}

impl EpParams {
    /// The defaults: [`ErrMode::None`], no handler.
    pub fn new() -> EpParams {
        EpParams::default()
    }

    /// Sets the error-handling mode.
    pub fn err_mode(self, err_mode: ErrMode) -> EpParams {
        EpParams { err_mode, ..self }
    }

    /// Runs `f` once if the endpoint fails; sets [`ErrMode::Peer`].
    pub fn on_error(
        self,
        f: impl FnOnce(&mut WorkerMut<'_>, Ep, Error) + Send + 'static,
    ) -> EpParams {
        EpParams {
            err_mode: ErrMode::Peer,
            on_error: Some(Box::new(f)),
        }
    }
}

impl Worker {
    /// [`Worker::connect`] with `params`.
    ///
    /// The endpoint to a worker is one however often it is connected
    /// (here or through a listener), so parameters add up: once one
    /// connection asked for [`ErrMode::Peer`] the endpoint stays in peer
    /// mode (a later [`ErrMode::None`] does not turn off the failure
    /// reports an earlier caller relies on), and every handler given runs
    /// once, in the order given, when it fails.
    pub fn connect_with(&mut self, remote: &[u8], params: EpParams) -> Result<Ep> {
        let ep = self.connect(remote)?;
        self.apply_ep_params(ep, params);
        Ok(ep)
    }

    /// Adds `params` to `ep`'s error handling (see [`Worker::connect_with`]).
    pub(crate) fn apply_ep_params(&mut self, ep: Ep, params: EpParams) {
        if params.err_mode != ErrMode::Peer {
            return;
        }
        self.core.set_report_failure(ep.0, true);
        // Failures are watched from the start: the peer hears of the
        // endpoint now, not with its first operation.
        self.core.wake_ep(&mut self.ifaces, ep.0);
        if let (Some(st), Some(h)) = (self.core.eps.get_mut(ep.0), params.on_error) {
            st.on_error.get_or_insert_with(Default::default).0.push(h);
        }
    }

    /// The error-handling mode of `ep`.
    pub fn ep_err_mode(&self, ep: Ep) -> Result<ErrMode> {
        let st = self.core.eps.get(ep.0).ok_or(Error::InvalidHandle)?;
        Ok(match st.report_failure {
            true => ErrMode::Peer,
            false => ErrMode::None,
        })
    }

    /// `ep` is being closed: its end is no failure to report.
    pub(crate) fn forget_err_handler(&mut self, ep: Ep) {
        self.core.set_report_failure(ep.0, false);
        if let Some(st) = self.core.eps.get_mut(ep.0) {
            st.on_error = None;
        }
    }

    /// Runs the handlers of the endpoints that failed; returns how many
    /// failures it took.
    pub(crate) fn run_err_handlers(&mut self) -> usize {
        let failed = std::mem::take(&mut self.core.done.ep_failures);
        let n = failed.len();
        for (id, err, h) in failed {
            for h in h.map(|OnError(hs)| hs).unwrap_or_default() {
                h(&mut WorkerMut::new(self), Ep(id), err.clone());
            }
        }
        n
    }
}
