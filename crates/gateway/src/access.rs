//! A node's access control as the gate and the handlers share it: the tokens it requires, the
//! clients it refuses and the hosts it answers to ([`Access`]), and when what a token opened
//! must end ([`revocation`]).

use mote_access::{FailureLimiter, Grants, Holder, HostAllowList, Scope};
use std::sync::Arc;

/// A node's access control.
pub struct Access {
    /// Whether requests need tokens; when not, only the internal routes are guarded (by the
    /// cluster secret, if there is one).
    pub tokens_required: bool,
    /// The live tokens.
    pub grants: Arc<Grants>,
    /// Refuses clients that keep failing.
    pub failures: FailureLimiter,
    /// The `Host` names the node answers to.
    pub hosts: HostAllowList,
}

/// Resolves when what `holder` opened must end: its token no longer allows `needed` (it was
/// revoked or narrowed). Never, for a request that no token let in.
pub(crate) fn revocation(
    access: &Arc<Access>,
    holder: Option<Holder>,
    needed: Scope,
) -> impl std::future::Future<Output = ()> + Send + 'static + use<> {
    let access = access.clone();
    async move {
        match holder {
            Some(holder) => access.grants.revoked(holder, needed).await,
            None => std::future::pending().await,
        }
    }
}
