// Package image tests the OCI image that `make image` writes
// (cmd/fleetdns-image): its index (amd64 and arm64), each image's config and
// files, that it is a function of its inputs, and that the amd64 image,
// unpacked, runs under a real OCI runtime (runc) with the securityContexts
// it ships for and answers DNS inside a network namespace of the test's own.
//
// FLEETDNS_IMAGE names the image layout (make e2e, make image-test); without
// it the test builds one with cmd/fleetdns-image, keeping the binaries under
// $FLEETDNS_CACHE so that a second run relinks nothing.
package image
