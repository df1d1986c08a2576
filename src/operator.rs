//! Who is at the keyboard: the `Actor` an operator action is recorded under,
//! taken from the environment at the edge (the core never reads it).
//!
//! * user: `SUDO_USER` when set (the person behind `sudo`), else `USER`,
//!   else `LOGNAME`, else "unknown";
//! * origin: "ssh 10.0.0.5" from `SSH_CONNECTION` (the client address), else
//!   "local"; "+sudo" when the user came through sudo;
//! * account: this process's own OS user, as the engine's: in the process
//!   that runs the engine, Slurm's commands run with this user's rights.
//!   An attached console's engine sets it from the socket's peer instead.
//!
//! Owns nothing else: whether the actor may act is the core's decision.

use crate::domain::event::{Actor, Role};

/// The actor from the given environment values (pure, for tests).
pub fn actor_from(sudo_user: Option<&str>, user: Option<&str>, logname: Option<&str>, ssh_connection: Option<&str>, role: Role) -> Actor {
    actor_named(sudo_user, user, logname, ssh_connection, role, "unknown")
}

fn actor_named(sudo_user: Option<&str>, user: Option<&str>, logname: Option<&str>, ssh_connection: Option<&str>, role: Role, fallback: &str) -> Actor {
    let nonempty = |v: Option<&str>| v.map(str::trim).filter(|v| !v.is_empty()).map(str::to_string);
    let sudo = nonempty(sudo_user);
    let name = sudo.clone().or_else(|| nonempty(user)).or_else(|| nonempty(logname)).unwrap_or_else(|| fallback.to_string());
    let mut origin = match nonempty(ssh_connection).and_then(|c| c.split_whitespace().next().map(str::to_string)) {
        Some(client) => format!("ssh {client}"),
        None => "local".to_string(),
    };
    if sudo.is_some() {
        origin.push_str(" +sudo");
    }
    Actor { user: name, origin, role, account: None }
}

/// The actor of this process: with no name in the environment, its OS
/// user's (never "unknown" where the system knows better).
pub fn actor_from_env(role: Role) -> Actor {
    let var = |k: &str| std::env::var(k).ok();
    let own = crate::store::file::user_name(crate::store::file::nix_uid());
    let mut actor = actor_named(var("SUDO_USER").as_deref(), var("USER").as_deref(), var("LOGNAME").as_deref(), var("SSH_CONNECTION").as_deref(), role, &own);
    actor.account = Some(crate::domain::event::OsAccount { name: own, engine: true });
    actor
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sudo_user_wins_and_ssh_gives_the_client_address() {
        let a = actor_from(Some("ana"), Some("root"), None, Some("10.0.0.5 52114 10.0.0.1 22"), Role::Operator);
        assert_eq!((a.user.as_str(), a.origin.as_str()), ("ana", "ssh 10.0.0.5 +sudo"));
        let a = actor_from(None, Some("bob"), Some("bob"), None, Role::Viewer);
        assert_eq!((a.user.as_str(), a.origin.as_str(), a.role), ("bob", "local", Role::Viewer));
        let a = actor_from(Some(""), None, Some("carol"), Some("  "), Role::Operator);
        assert_eq!((a.user.as_str(), a.origin.as_str()), ("carol", "local"));
        assert_eq!(actor_from(None, None, None, None, Role::Operator).user, "unknown");
    }
}
