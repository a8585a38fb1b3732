//! flycode's core, on the protocol and the sandbox crates: the call service every door runs
//! its calls through, the tools, the settings and the tag dialect's runner.
//!
//! - [`tools`]: the whitelisted tools and their engines, the policy, and `tools::executor`, the
//!   call service (a door's session; deciding, asking, running, recording a call);
//! - [`config`]: flags, `flycode.toml` and defaults resolved into one configuration;
//! - [`tags`]: seed 000's tag dialect run through the call service, answered in the tag form.

pub mod config;
pub mod tags;
pub mod tools;

// The layers beneath, under the names the code has always used for them.
use flycode_protocol as protocol;
use flycode_sandbox as sandbox;
