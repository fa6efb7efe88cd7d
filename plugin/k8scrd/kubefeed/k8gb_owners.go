package kubefeed

import (
	"sync"

	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// gslbOwners keeps the DNSEndpoints that k8gb's operator wrote (labelled
// k8gb.io/dnstype or k8gb.absa.oss/dnstype, controlled by a Gslb) and
// hands the builder only those whose Gslb is not served: the operator's
// frozen records never beat the live source. It serializes the builder
// calls for these DNSEndpoints, so that a Gslb served concurrently with
// its DNSEndpoint's update never lets the DNSEndpoint through.
type gslbOwners struct {
	b object.Sink

	mu     sync.Mutex
	served map[string]string        // Gslb key -> uid
	uids   map[string]int           // uid -> Gslb keys serving it
	held   map[string]*heldEndpoint // DNSEndpoint key -> it
	byUID  map[string]map[string]struct{}
}

type heldEndpoint struct {
	owner   string
	obj     *object.Object
	ignored bool
}

func newGslbOwners(b object.Sink) *gslbOwners {
	return &gslbOwners{b: b, served: map[string]string{}, uids: map[string]int{}, held: map[string]*heldEndpoint{}, byUID: map[string]map[string]struct{}{}}
}

// k8gbController is the uid of the Gslb that controls a DNSEndpoint
// k8gb's operator wrote, "" for any other DNSEndpoint.
func k8gbController(m *metav1.ObjectMeta) string {
	if m.Labels[object.LabelDNSType] == "" && m.Labels[object.LabelLegacyDNSType] == "" {
		return ""
	}
	for _, r := range m.OwnerReferences {
		if r.Controller == nil || !*r.Controller || r.Kind != object.KindGslb {
			continue
		}
		if gv, err := schema.ParseGroupVersion(r.APIVersion); err == nil && (gv.Group == object.GslbGroup || gv.Group == object.GslbLegacyGroup) {
			return string(r.UID)
		}
	}
	return ""
}

// upsert hands the builder DNSEndpoint o, controlled by the Gslb of uid
// owner ("" none), unless that Gslb is served.
func (g *gslbOwners) upsert(o *object.Object, owner string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.forget(o.Key)
	if owner == "" {
		g.b.Upsert(o)
		return
	}
	h := &heldEndpoint{owner: owner, obj: o, ignored: g.uids[owner] > 0}
	g.held[o.Key] = h
	m := g.byUID[owner]
	if m == nil {
		m = map[string]struct{}{}
		g.byUID[owner] = m
	}
	m[o.Key] = struct{}{}
	if h.ignored {
		g.b.Remove(o.Key)
	} else {
		g.b.Upsert(o)
	}
	g.count()
}

// remove drops DNSEndpoint key, deleted at version (for the SOA serial).
func (g *gslbOwners) remove(key string, version uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.forget(key)
	g.b.RemoveAt(key, version)
	g.count()
}

func (g *gslbOwners) forget(key string) {
	h := g.held[key]
	if h == nil {
		return
	}
	delete(g.held, key)
	if m := g.byUID[h.owner]; m != nil {
		delete(m, key)
		if len(m) == 0 {
			delete(g.byUID, h.owner)
		}
	}
}

// serve marks the Gslb at key (of uid) served: its DNSEndpoints leave the store.
func (g *gslbOwners) serve(key, uid string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if old, ok := g.served[key]; ok {
		if old == uid {
			return
		}
		g.drop(key)
	}
	g.served[key] = uid
	g.uids[uid]++
	for k := range g.byUID[uid] {
		if h := g.held[k]; !h.ignored {
			h.ignored = true
			g.b.Remove(k)
		}
	}
	g.count()
}

// unserve marks the Gslb at key not served (gone): DNSEndpoints it
// controlled, while they remain, are served again.
func (g *gslbOwners) unserve(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.drop(key)
	g.count()
}

func (g *gslbOwners) drop(key string) {
	uid, ok := g.served[key]
	if !ok {
		return
	}
	delete(g.served, key)
	if g.uids[uid]--; g.uids[uid] > 0 {
		return
	}
	delete(g.uids, uid)
	for k := range g.byUID[uid] {
		if h := g.held[k]; h.ignored {
			h.ignored = false
			g.b.Upsert(h.obj)
		}
	}
}

// count sets the gauge of DNSEndpoints ignored now.
func (g *gslbOwners) count() {
	n := 0
	for _, h := range g.held {
		if h.ignored {
			n++
		}
	}
	gslbIgnoredEndpoints.Set(float64(n))
}
