//! Issue 33's attacks, each reproduced against the real binary and refused, with the legitimate
//! use beside it still working. One module per adversary's way in:
//! what reaches guests (credentials), what web pages can do (Host, Origin, the dashboard's
//! origin), routes, the node's network (outbound grants), open streams after revocation,
//! guessing, and the secrets around a node (argv, the admin token, logs).

pub(crate) mod outbound;
