// Package deploy tests what users apply and run: every manifest under deploy/
// against a real kube-apiserver (server-side apply), the shipped RBAC with a
// real ServiceAccount token, the shipped Corefiles run by the built binary,
// and the Dockerfile's build flags.
//
// Where a shipped file names something that cannot exist on the test machine
// (the cluster's Service addresses, port 53 on every interface, in-cluster
// credentials), the test substitutes that one thing and says so at the place
// it does; everything else runs as shipped.
package deploy
