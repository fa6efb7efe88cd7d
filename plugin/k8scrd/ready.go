package k8scrd

// Ready implements the ready.Readiness interface: true once the first full
// sync from the source has been applied and start-up is done. The ready
// plugin answers during start-up already, before the DNS listeners open; a
// plugin still inside its OnStartup must not be reported ready, or clients
// that trust /ready find the DNS port closed.
func (k *K8sCRD) Ready() bool { return k.started.Load() && k.snap.Load().Synced }
