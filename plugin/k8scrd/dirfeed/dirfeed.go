// Package dirfeed is k8scrd's folder feed: it reads manifests (YAML or
// JSON, one or more documents, Lists) from a folder, watches it, and hands
// the DNSEndpoints and what the cluster's kinds declare (derived through
// package derive over the folder's own objects) to an object.Sink (the
// builder). A document that does not decode is skipped, logged with its
// file and line, and counted; the rest is served. It reads Config, never
// the Corefile, and imports no plugin code.
package dirfeed

import clog "github.com/coredns/coredns/plugin/pkg/log"

var log = clog.NewWithPlugin("k8scrd")
