package k8scrd

// Ready implements the ready.Readiness interface: true once the first full
// sync from the source has been applied.
func (k *K8sCRD) Ready() bool { return k.snap.Load().synced }
