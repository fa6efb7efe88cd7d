// Command bare is the ceiling for the authoritative benchmarks: a miekg/dns
// server that answers every query with one prebuilt response (only the ID
// and question are patched), doing none of the work a real server does.
package main

import (
	"flag"
	"log"
	"net"

	"github.com/miekg/dns"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:1053", "UDP address to listen on")
	flag.Parse()

	rr, err := dns.NewRR("bench. 30 IN A 192.0.2.1")
	if err != nil {
		log.Fatal(err)
	}
	tmpl := new(dns.Msg)
	tmpl.Response = true
	tmpl.Authoritative = true
	tmpl.Answer = []dns.RR{rr}

	pc, err := net.ListenPacket("udp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := *tmpl
		m.Id = r.Id
		m.Question = r.Question
		m.Opcode = r.Opcode
		m.RecursionDesired = r.RecursionDesired
		m.Answer = []dns.RR{rr}
		if len(r.Question) == 1 {
			h := *rr.(*dns.A)
			h.Hdr.Name = r.Question[0].Name
			m.Answer = []dns.RR{&h}
		}
		w.WriteMsg(&m)
	})}
	log.Fatal(srv.ActivateAndServe())
}
