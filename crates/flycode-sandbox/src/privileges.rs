//! Least privilege for contained programs (Linux): the thread that starts a program gives up
//! every capability first, so the program starts with none, even when flycode runs as root.
//! Capabilities, like the Landlock domain and `no_new_privs`, belong to a thread on Linux and a
//! child starts with its creating thread's; only the short-lived spawner thread of
//! [`super::contain`] calls [`drop_all`], flycode's other threads keep theirs. Needs no `unsafe`:
//! rustix wraps `prctl` and `capset`.
//!
//! What is dropped, in this order (each later step needs `CAP_SETPCAP`, which the last removes):
//!
//! 1. the **bounding** set, every capability up to the kernel's last one: an `execve` by a
//!    process with user id 0 would otherwise grant it the whole bounding set again;
//! 2. the **ambient** set;
//! 3. the **securebits**: `SECBIT_NOROOT` (user id 0 earns nothing at `execve`),
//!    `SECBIT_NO_CAP_AMBIENT_RAISE` and `SECBIT_KEEP_CAPS` off, all locked, so no descendant
//!    can undo them;
//! 4. the **effective, permitted and inheritable** sets, emptied by `capset`.
//!
//! Without `CAP_SETPCAP` (an ordinary user, or root in a container that took it away) steps 1
//! and 3 are refused by the kernel; that is accepted, because `no_new_privs` (set with the
//! Landlock domain) keeps an `execve` from raising the permitted set above the empty one it
//! starts with. Step 4 never needs a capability; if the sets are not empty afterwards the
//! program is not started (fail closed).

use std::io;

use rustix::thread::{
    CapabilitiesSecureBits, CapabilitySet, CapabilitySets, capabilities,
    clear_ambient_capability_set, remove_capability_from_bounding_set, set_capabilities,
    set_capabilities_secure_bits,
};

/// The highest capability number any kernel may know (the sets are 64 bits wide); a number
/// above the running kernel's last one is refused with `EINVAL` and skipped.
const MAX_CAPABILITY: u32 = 63;

/// Drops every capability of the calling thread, as the module documentation says. An error
/// means the thread may still hold a capability and must not start a program.
pub fn drop_all() -> io::Result<()> {
    for number in 0..=MAX_CAPABILITY {
        // EINVAL: no such capability on this kernel; EPERM: no CAP_SETPCAP (see the module docs).
        let _ = remove_capability_from_bounding_set(CapabilitySet::from_bits_retain(1 << number));
    }
    let _ = clear_ambient_capability_set();
    let _ = set_capabilities_secure_bits(
        CapabilitiesSecureBits::NO_ROOT
            | CapabilitiesSecureBits::NO_ROOT_LOCKED
            | CapabilitiesSecureBits::NO_CAP_AMBIENT_RAISE
            | CapabilitiesSecureBits::NO_CAP_AMBIENT_RAISE_LOCKED
            | CapabilitiesSecureBits::KEEP_CAPS_LOCKED,
    );
    let none = CapabilitySets {
        effective: CapabilitySet::empty(),
        permitted: CapabilitySet::empty(),
        inheritable: CapabilitySet::empty(),
    };
    set_capabilities(None, none)?;
    let left = capabilities(None)?;
    if left.effective.is_empty() && left.permitted.is_empty() && left.inheritable.is_empty() {
        Ok(())
    } else {
        Err(io::Error::other(
            "the thread starting the program could not give up its capabilities",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The status line `name` of this thread, as a number.
    fn status_mask(name: &str) -> u64 {
        let status = std::fs::read_to_string("/proc/thread-self/status").unwrap();
        let line = status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .unwrap_or_else(|| panic!("no {name} in {status}"));
        u64::from_str_radix(line.trim(), 16).unwrap()
    }

    #[test]
    fn a_thread_that_drops_them_holds_no_capability_and_the_others_keep_theirs() {
        let before = status_mask("CapEff:");
        let dropped = std::thread::spawn(|| {
            drop_all().unwrap();
            [
                status_mask("CapInh:"),
                status_mask("CapPrm:"),
                status_mask("CapEff:"),
                status_mask("CapAmb:"),
                status_mask("CapBnd:"),
            ]
        })
        .join()
        .unwrap();
        assert_eq!(&dropped[..4], &[0, 0, 0, 0], "{dropped:x?}");
        if rustix::process::geteuid().is_root() && before != 0 {
            assert_eq!(dropped[4], 0, "the bounding set as root: {:x}", dropped[4]);
        } else {
            eprintln!("note: not root with capabilities, the bounding set is not checked");
        }
        assert_eq!(
            status_mask("CapEff:"),
            before,
            "another thread lost its own"
        );
    }
}
