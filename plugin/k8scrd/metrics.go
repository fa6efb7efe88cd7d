package k8scrd

// k8scrd's metrics are declared in the packages that count them, each in
// its metrics.go: the feeds' sync errors and the refused endpoints in
// object, the builder's in builder, the derivations' unserved names in
// derive, the k8gb ownership gauge in kubefeed, the resolver's in resolve
// and the Events' in kube. Their names all begin coredns_k8scrd_; the
// README lists them.
