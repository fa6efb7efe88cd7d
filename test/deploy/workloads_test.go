package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/fleetdns/fleetdns/test/harness"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func decodeInto(t *testing.T, o *unstructured.Unstructured, v any) {
	t.Helper()
	j, err := o.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(j, v); err != nil {
		t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
	}
}

func findObject[T any](t *testing.T, objs []*unstructured.Unstructured, kind, name string) *T {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			v := new(T)
			decodeInto(t, o, v)
			return v
		}
	}
	t.Fatalf("no %s %s among %v", kind, name, harness.KindsOf(objs))
	return nil
}

// checkFleetDNSContainer checks what every fleetdns container promises:
// non-root as uid/gid 65532, every capability dropped (port 53 comes from the
// pod's sysctl net.ipv4.ip_unprivileged_port_start=53, which
// TestNonRootBindsPort53WithTheSysctl runs), no privilege escalation,
// read-only root filesystem, resource requests, health and ready probes.
func checkFleetDNSContainer(t *testing.T, where string, pod corev1.PodSpec, c corev1.Container, healthPort, readyPort int) {
	t.Helper()
	sc := c.SecurityContext
	if sc == nil {
		t.Fatalf("%s: container %s has no securityContext", where, c.Name)
	}
	nonRoot := (sc.RunAsNonRoot != nil && *sc.RunAsNonRoot) || (pod.SecurityContext != nil && pod.SecurityContext.RunAsNonRoot != nil && *pod.SecurityContext.RunAsNonRoot)
	uid := sc.RunAsUser
	if uid == nil && pod.SecurityContext != nil {
		uid = pod.SecurityContext.RunAsUser
	}
	if !nonRoot || uid == nil || *uid == 0 {
		t.Errorf("%s: container %s may run as root (runAsNonRoot %v, runAsUser %v)", where, c.Name, nonRoot, uid)
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("%s: container %s allows privilege escalation", where, c.Name)
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("%s: container %s has a writable root filesystem", where, c.Name)
	}
	gid := sc.RunAsGroup
	if gid == nil && pod.SecurityContext != nil {
		gid = pod.SecurityContext.RunAsGroup
	}
	if sc.RunAsUser == nil || *sc.RunAsUser != 65532 || gid == nil || *gid != 65532 || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Errorf("%s: container %s runAsNonRoot %v runAsUser %v runAsGroup %v, want true 65532 65532 (the image's numeric user)", where, c.Name, sc.RunAsNonRoot, sc.RunAsUser, gid)
	}
	if sc.Capabilities == nil || fmt.Sprint(sc.Capabilities.Drop) != "[ALL]" || len(sc.Capabilities.Add) != 0 {
		t.Errorf("%s: container %s capabilities %+v, want drop [ALL] and nothing added", where, c.Name, sc.Capabilities)
	}
	var sysctl string
	if pod.SecurityContext != nil {
		for _, s := range pod.SecurityContext.Sysctls {
			if s.Name == "net.ipv4.ip_unprivileged_port_start" {
				sysctl = s.Value
			}
		}
	}
	if sysctl != "53" {
		t.Errorf("%s: pod sysctl net.ipv4.ip_unprivileged_port_start = %q, want \"53\" (port 53 without a capability)", where, sysctl)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		t.Errorf("%s: container %s has no cpu and memory requests", where, c.Name)
	}
	probe := func(name string, p *corev1.Probe, path string, port int) {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path || p.HTTPGet.Port.IntValue() != port {
			t.Errorf("%s: container %s %s probe %+v, want GET %s on %d", where, c.Name, name, p, path, port)
		}
	}
	probe("liveness", c.LivenessProbe, "/health", healthPort)
	probe("readiness", c.ReadinessProbe, "/ready", readyPort)
	if fmt.Sprint(c.Args) != "[-conf /etc/coredns/Corefile]" {
		t.Errorf("%s: container %s args %v", where, c.Name, c.Args)
	}
}

func portsOf(ports []corev1.ContainerPort) string {
	var s []string
	for _, p := range ports {
		s = append(s, fmt.Sprintf("%s=%d/%s", p.Name, p.ContainerPort, p.Protocol))
	}
	sort.Strings(s)
	return strings.Join(s, " ")
}

func servicePortsOf(ports []corev1.ServicePort) string {
	var s []string
	for _, p := range ports {
		s = append(s, fmt.Sprintf("%s=%d/%s", p.Name, p.Port, p.Protocol))
	}
	sort.Strings(s)
	return strings.Join(s, " ")
}

// TestKubeSystemWorkloadMatchesStockOneForOne compares deploy/kube-system with
// stock CoreDNS (testdata/stock-coredns.yaml, kubeadm's objects): same names,
// labels, selector, ports, probe endpoints, so everything that points at
// stock CoreDNS points at fleetdns; and the hardening promised on top.
func TestKubeSystemWorkloadMatchesStockOneForOne(t *testing.T) {
	k := harness.SharedKube(t)
	ours := k.Kustomize(t, "deploy/kube-system")
	b, err := os.ReadFile("testdata/stock-coredns.yaml")
	if err != nil {
		t.Fatal(err)
	}
	stock, err := harness.DecodeYAML(string(b))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range stock {
		if o.GetKind() != "ConfigMap" {
			findObject[map[string]any](t, ours, o.GetKind(), o.GetName())
		}
	}

	d := findObject[appsv1.Deployment](t, ours, "Deployment", "coredns")
	sd := findObject[appsv1.Deployment](t, stock, "Deployment", "coredns")
	if !reflect.DeepEqual(d.Spec.Selector, sd.Spec.Selector) {
		t.Errorf("Deployment selector %v, stock %v (immutable: a different one cannot replace stock)", d.Spec.Selector, sd.Spec.Selector)
	}
	if d.Spec.Template.Labels["k8s-app"] != "kube-dns" || d.Labels["k8s-app"] != "kube-dns" {
		t.Errorf("Deployment labels %v, pod labels %v: want k8s-app: kube-dns", d.Labels, d.Spec.Template.Labels)
	}
	if d.Spec.Template.Spec.ServiceAccountName != "coredns" || d.Spec.Template.Spec.DNSPolicy != corev1.DNSDefault ||
		d.Spec.Template.Spec.PriorityClassName != "system-cluster-critical" {
		t.Errorf("pod spec: serviceAccount %q dnsPolicy %q priorityClass %q; want stock's coredns, Default, system-cluster-critical",
			d.Spec.Template.Spec.ServiceAccountName, d.Spec.Template.Spec.DNSPolicy, d.Spec.Template.Spec.PriorityClassName)
	}
	if len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("want one container, have %d", len(d.Spec.Template.Spec.Containers))
	}
	c, sc := d.Spec.Template.Spec.Containers[0], sd.Spec.Template.Spec.Containers[0]
	if portsOf(c.Ports) != portsOf(sc.Ports) {
		t.Errorf("container ports %s, stock %s", portsOf(c.Ports), portsOf(sc.Ports))
	}
	checkFleetDNSContainer(t, "kube-system", d.Spec.Template.Spec, c, 8080, 8181)
	var spread []string
	for _, tc := range d.Spec.Template.Spec.TopologySpreadConstraints {
		spread = append(spread, fmt.Sprintf("%s %d %s %v", tc.TopologyKey, tc.MaxSkew, tc.WhenUnsatisfiable, tc.LabelSelector.MatchLabels))
	}
	if got, want := strings.Join(spread, "; "), "kubernetes.io/hostname 1 ScheduleAnyway map[k8s-app:kube-dns]; topology.kubernetes.io/zone 1 ScheduleAnyway map[k8s-app:kube-dns]"; got != want {
		t.Errorf("topologySpreadConstraints %s, want %s", got, want)
	}

	svc := findObject[corev1.Service](t, ours, "Service", "kube-dns")
	ssvc := findObject[corev1.Service](t, stock, "Service", "kube-dns")
	if !reflect.DeepEqual(svc.Spec.Selector, ssvc.Spec.Selector) || servicePortsOf(svc.Spec.Ports) != servicePortsOf(ssvc.Spec.Ports) {
		t.Errorf("Service selector %v ports %s, stock %v %s", svc.Spec.Selector, servicePortsOf(svc.Spec.Ports), ssvc.Spec.Selector, servicePortsOf(ssvc.Spec.Ports))
	}
	for _, l := range []string{"k8s-app", "kubernetes.io/cluster-service", "kubernetes.io/name"} {
		if svc.Labels[l] != ssvc.Labels[l] {
			t.Errorf("Service label %s = %q, stock %q", l, svc.Labels[l], ssvc.Labels[l])
		}
	}
}

// TestGSLBWorkloadHardened checks the GSLB name servers' Deployment and
// Service.
func TestGSLBWorkloadHardened(t *testing.T) {
	k := harness.SharedKube(t)
	objs := k.Kustomize(t, "deploy/gslb")
	d := findObject[appsv1.Deployment](t, objs, "Deployment", "fleetdns-gslb")
	checkFleetDNSContainer(t, "gslb", d.Spec.Template.Spec, d.Spec.Template.Spec.Containers[0], 8080, 8181)
	if d.Spec.Template.Spec.ServiceAccountName != "fleetdns-gslb" {
		t.Errorf("serviceAccountName %q", d.Spec.Template.Spec.ServiceAccountName)
	}
	svc := findObject[corev1.Service](t, objs, "Service", "fleetdns-gslb")
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal {
		t.Errorf("Service type %s externalTrafficPolicy %s; want LoadBalancer, Local (geoip needs the client's address)", svc.Spec.Type, svc.Spec.ExternalTrafficPolicy)
	}
	if got := servicePortsOf(svc.Spec.Ports); got != "dns-tcp=53/TCP dns=53/UDP" {
		t.Errorf("Service ports %s: only DNS is exposed to the world", got)
	}
	type rules struct {
		Rules []struct {
			APIGroups, Resources, Verbs []string
		}
	}
	// Read-only access to what the Corefile's resources need, in the one
	// namespace it reads; create on Events; cluster-wide only the two
	// cluster-scoped kinds.
	role := findObject[rules](t, objs, "Role", "fleetdns:gslb")
	if got, want := fmt.Sprint(role.Rules), "[{[externaldns.k8s.io] [dnsendpoints] [get list watch]} {[networking.k8s.io] [ingresses] [get list watch]}"+
		" {[] [services] [get list watch]} {[discovery.k8s.io] [endpointslices] [get list watch]}"+
		" {[gateway.networking.k8s.io] [gateways httproutes grpcroutes tlsroutes] [get list watch]} {[] [events] [create]}]"; got != want {
		t.Errorf("Role fleetdns:gslb rules\n%s\nwant\n%s", got, want)
	}
	cr := findObject[rules](t, objs, "ClusterRole", "fleetdns:gslb")
	if got, want := fmt.Sprint(cr.Rules), "[{[networking.k8s.io] [ingressclasses] [get list watch]} {[apiextensions.k8s.io] [customresourcedefinitions] [get list watch]}]"; got != want {
		t.Errorf("ClusterRole fleetdns:gslb rules\n%s\nwant\n%s", got, want)
	}
}

// TestSidecarPodSpec checks the sidecar's pod: a native sidecar started
// before the app, the pod's DNS pointed at it with the namespace's search
// list, and the probes.
func TestSidecarPodSpec(t *testing.T) {
	k := harness.SharedKube(t)
	objs := k.Kustomize(t, "deploy/sidecar")
	d := findObject[appsv1.Deployment](t, objs, "Deployment", "app")
	ps := d.Spec.Template.Spec
	if len(ps.InitContainers) != 1 {
		t.Fatalf("want the fleetdns init container, have %d", len(ps.InitContainers))
	}
	side := ps.InitContainers[0]
	if side.RestartPolicy == nil || *side.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Errorf("init container %s restartPolicy %v: want Always (a native sidecar, started before the app)", side.Name, side.RestartPolicy)
	}
	if side.StartupProbe == nil || side.StartupProbe.HTTPGet == nil || side.StartupProbe.HTTPGet.Path != "/ready" {
		t.Errorf("sidecar startupProbe %+v: the app must wait for /ready", side.StartupProbe)
	}
	checkFleetDNSContainer(t, "sidecar", ps, side, 8054, 8055)
	if ps.DNSPolicy != corev1.DNSNone || ps.DNSConfig == nil {
		t.Fatalf("dnsPolicy %q, dnsConfig %v: want None with a dnsConfig", ps.DNSPolicy, ps.DNSConfig)
	}
	ns := d.Namespace
	if got, want := fmt.Sprint(ps.DNSConfig.Nameservers), "[127.0.0.1]"; got != want {
		t.Errorf("nameservers %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(ps.DNSConfig.Searches), fmt.Sprintf("[%s.svc.cluster.local svc.cluster.local cluster.local]", ns); got != want {
		t.Errorf("searches %s, want %s (what ClusterFirst gives a pod in %s)", got, want, ns)
	}
	if len(ps.DNSConfig.Options) != 1 || ps.DNSConfig.Options[0].Name != "ndots" || ps.DNSConfig.Options[0].Value == nil || *ps.DNSConfig.Options[0].Value != "5" {
		var opts []string
		for _, o := range ps.DNSConfig.Options {
			v := ""
			if o.Value != nil {
				v = *o.Value
			}
			opts = append(opts, o.Name+":"+v)
		}
		t.Errorf("options %v, want [ndots:5]", opts)
	}
	app := ps.Containers[0]
	if app.ReadinessProbe == nil || app.ReadinessProbe.Exec == nil || !strings.Contains(strings.Join(app.ReadinessProbe.Exec.Command, " "), "kubernetes.default.svc.cluster.local.") {
		t.Errorf("app readinessProbe %+v: want a lookup of a harmless name through the pod's resolver", app.ReadinessProbe)
	}
	if ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken {
		t.Errorf("the sidecar pod mounts a ServiceAccount token it does not need")
	}
	// The Corefile the pod mounts is the one TestSidecarCorefileRoutesAsShipped runs.
	var vol *corev1.Volume
	for i := range ps.Volumes {
		if ps.Volumes[i].ConfigMap != nil {
			vol = &ps.Volumes[i]
		}
	}
	if vol == nil || vol.ConfigMap.Name != "fleetdns-sidecar" {
		t.Errorf("sidecar volume %+v: want ConfigMap fleetdns-sidecar", vol)
	}
}
