package store

import "testing"

func TestNotifierCoalescesAndCancels(t *testing.T) {
	var n Notifier
	a, cancelA := n.Subscribe()
	b, cancelB := n.Subscribe()
	defer cancelB()
	n.Publish()
	n.Publish() // a busy subscriber keeps one signal for both
	for name, ch := range map[string]<-chan struct{}{"a": a, "b": b} {
		select {
		case <-ch:
		default:
			t.Fatalf("subscriber %s has no signal after Publish", name)
		}
		select {
		case <-ch:
			t.Fatalf("subscriber %s has two signals; want one for both changes", name)
		default:
		}
	}
	cancelA()
	n.Publish()
	select {
	case <-a:
		t.Error("a signal after cancel")
	default:
	}
	select {
	case <-b:
	default:
		t.Error("the other subscriber lost its signal")
	}
}
