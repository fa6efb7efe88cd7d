package gslb

import (
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// exchangeServer answers on UDP and TCP of one loopback port with what
// answer returns, and remembers each query's source port and ID.
type exchangeServer struct {
	addr   string
	answer func(r *dns.Msg, tcp bool) []*dns.Msg // written in order; none: silent

	mu    sync.Mutex
	ports []int
	ids   []uint16
	tcp   int
}

func startExchangeServer(t *testing.T, answer func(r *dns.Msg, tcp bool) []*dns.Msg) *exchangeServer {
	t.Helper()
	s := &exchangeServer{answer: answer}
	var (
		pc  net.PacketConn
		ln  net.Listener
		err error
	)
	for range 10 { // the UDP port may be taken for TCP: try another
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		if ln, err = net.Listen("tcp", pc.LocalAddr().String()); err == nil {
			break
		}
		pc.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	s.addr = pc.LocalAddr().String()
	for _, srv := range []*dns.Server{{PacketConn: pc, Handler: s}, {Listener: ln, Handler: s}} {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		go srv.ActivateAndServe()
		<-started
		t.Cleanup(func() { srv.Shutdown() })
	}
	return s
}

func (s *exchangeServer) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	_, tcp := w.RemoteAddr().(*net.TCPAddr)
	s.mu.Lock()
	if tcp {
		s.tcp++
	} else {
		s.ports = append(s.ports, w.RemoteAddr().(*net.UDPAddr).Port)
		s.ids = append(s.ids, r.Id)
	}
	s.mu.Unlock()
	for _, m := range s.answer(r, tcp) {
		w.WriteMsg(m)
	}
}

func aReply(r *dns.Msg, ip string) *dns.Msg {
	m := new(dns.Msg)
	m.SetReply(r)
	m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 30}, A: net.ParseIP(ip)}}
	return m
}

func exchangeA(t *testing.T, x exchanger, server, name string) (*dns.Msg, error) {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	return x.exchange(t.Context(), m, server)
}

func TestExchangeFreshSourcePortAndIDPerQuery(t *testing.T) {
	s := startExchangeServer(t, func(r *dns.Msg, _ bool) []*dns.Msg { return []*dns.Msg{aReply(r, "10.0.0.1")} })
	x := newExchanger(time.Second)
	const n = 8
	for range n {
		if _, err := exchangeA(t, x, s.addr, "a."+zone); err != nil {
			t.Fatal(err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ports, ids := map[int]bool{}, map[uint16]bool{}
	for i := range s.ports {
		ports[s.ports[i]], ids[s.ids[i]] = true, true
	}
	// Random ports and IDs may repeat by chance, but not across all n.
	if len(ports) < 2 || len(ids) < 2 {
		t.Errorf("%d queries came from %d source ports with %d IDs, want a fresh random port and ID per query", n, len(ports), len(ids))
	}
}

func TestExchangeSkipsDatagramWithAnotherID(t *testing.T) {
	s := startExchangeServer(t, func(r *dns.Msg, _ bool) []*dns.Msg {
		stray := aReply(r, "10.6.6.6")
		stray.Id++
		return []*dns.Msg{stray, aReply(r, "10.0.0.1")}
	})
	r, err := exchangeA(t, newExchanger(time.Second), s.addr, "a."+zone)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Answer[0].(*dns.A).A.String(); got != "10.0.0.1" {
		t.Errorf("answer %s, want 10.0.0.1 (the datagram with another ID is not the answer)", got)
	}
}

func TestExchangeTruncatedAsksOverTCP(t *testing.T) {
	s := startExchangeServer(t, func(r *dns.Msg, tcp bool) []*dns.Msg {
		if !tcp {
			m := new(dns.Msg)
			m.SetReply(r)
			m.Truncated = true
			return []*dns.Msg{m}
		}
		return []*dns.Msg{aReply(r, "10.0.0.2")}
	})
	r, err := exchangeA(t, newExchanger(time.Second), s.addr, "a."+zone)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "10.0.0.2" || s.tcp != 1 {
		t.Errorf("answer %v after %d TCP queries, want 10.0.0.2 over TCP", r.Answer, s.tcp)
	}
}

func TestExchangeAnswerToAnotherQuestionIsError(t *testing.T) {
	s := startExchangeServer(t, func(r *dns.Msg, _ bool) []*dns.Msg {
		m := aReply(r, "10.0.0.1")
		m.Question[0].Name = "other." + zone
		return []*dns.Msg{m}
	})
	_, err := exchangeA(t, newExchanger(time.Second), s.addr, "a."+zone)
	var ae *answerError
	if !errors.As(err, &ae) || ae.reason != reasonWrongQuestion {
		t.Errorf("error %v, want %s", err, reasonWrongQuestion)
	}
}

func TestExchangeSilentServerTimesOut(t *testing.T) {
	s := startExchangeServer(t, func(*dns.Msg, bool) []*dns.Msg { return nil })
	_, err := exchangeA(t, newExchanger(100*time.Millisecond), s.addr, "a."+zone)
	if reasonOf(err) != reasonTimeout {
		t.Errorf("error %v, want a timeout", err)
	}
}

// strayServer answers every UDP query on loopback with the datagrams of
// stray (raw bytes) first, then the answer.
func strayServer(t *testing.T, stray ...[]byte) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			q := new(dns.Msg)
			if q.Unpack(buf[:n]) != nil {
				continue
			}
			for _, s := range stray {
				pc.WriteTo(s, from)
			}
			a := aReply(q, "10.0.0.1")
			if q.Question[0].Qtype != dns.TypeA {
				a.Answer = nil // NODATA
			}
			out, _ := a.Pack()
			pc.WriteTo(out, from)
		}
	}()
	return pc.LocalAddr().String()
}

func TestExchangeSurvivesStrayDatagrams(t *testing.T) {
	q := new(dns.Msg)
	q.SetQuestion("a."+zone, dns.TypeA)
	// The stray datagrams carry the ID of whatever query is in flight: the
	// server cannot know it in advance, so the second one reuses the
	// header of a well-formed message and the question of another name.
	other := new(dns.Msg)
	other.SetQuestion("other."+zone, dns.TypeA)
	other.Response = true
	otherWire, _ := other.Pack()
	addr := strayServer(t, []byte{0, 0}, []byte("\x12\x34\x81"), otherWire)
	for range 5 {
		r, err := exchangeA(t, newExchanger(time.Second), addr, "a."+zone)
		if err != nil {
			t.Fatalf("a stray datagram before the answer failed the exchange: %v", err)
		}
		if got := r.Answer[0].(*dns.A).A.String(); got != "10.0.0.1" {
			t.Errorf("answer %s, want 10.0.0.1", got)
		}
	}
}
