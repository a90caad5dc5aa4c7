//! A run's start on its own task: after the delay a continued run waits
//! (tests), the files its messages attach are read (`link::RunFiles`),
//! never on the chat's actor.

/// A run, after `delay` (a continued run's), its history's files read first.
pub(super) async fn then_run(
    mut spec: crate::agent::runtime::RunSpec,
    link: crate::link::RunLink,
    control: crate::link::RunControl,
    delay: Option<std::time::Duration>,
) {
    if let Some(delay) = delay.filter(|d| !d.is_zero()) {
        tokio::time::sleep(delay).await;
    }
    if let Some(files) = link.files() {
        let messages = spec.history.iter_mut().map(|s| &mut s.message).collect();
        files.read(messages).await;
    }
    crate::agent::runtime::run(spec, link, control).await;
}
