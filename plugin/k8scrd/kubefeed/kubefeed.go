// Package kubefeed is k8scrd's API feed: client-go informers over
// DNSEndpoints and the cluster's own kinds (with the EndpointSlices,
// IngressClasses and Gateways their derivations read), trimmed by
// object's transforms as they arrive, derived through package derive, and
// handed to an object.Sink (the builder). It keeps the dependency index
// (what each derivation read), k8gb's ownership of the operator's
// DNSEndpoints, and writes Events through package kube. It reads Config,
// never the Corefile, and imports no plugin code.
package kubefeed

import clog "github.com/coredns/coredns/plugin/pkg/log"

var log = clog.NewWithPlugin("k8scrd")
