package network_test

import (
	"net/netip"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

func TestAnswerDNS(t *testing.T) {
	n := cluster(t, nil)
	ask := func(name string, typ dnsmessage.Type) dnsmessage.Message {
		t.Helper()
		q := dnsmessage.Message{Header: dnsmessage.Header{ID: 7, RecursionDesired: true},
			Questions: []dnsmessage.Question{{Name: dnsmessage.MustNewName(name), Type: typ, Class: dnsmessage.ClassINET}}}
		query, err := q.Pack()
		if err != nil {
			t.Fatal(err)
		}
		data, err := n.AnswerDNS(query)
		if err != nil {
			t.Fatal(err)
		}
		var m dnsmessage.Message
		if err := m.Unpack(data); err != nil {
			t.Fatal(err)
		}
		if m.ID != 7 || !m.Response || len(m.Questions) != 1 {
			t.Fatalf("answer header %+v", m.Header)
		}
		return m
	}
	m := ask("10-64-1-2.default.pod.cluster.local.", dnsmessage.TypeA)
	if m.RCode != dnsmessage.RCodeSuccess || len(m.Answers) != 1 ||
		netip.AddrFrom4(m.Answers[0].Body.(*dnsmessage.AResource).A) != netip.MustParseAddr("10.64.1.2") {
		t.Errorf("pod record: %+v", m)
	}
	if m := ask("10-64-1-2.default.pod.cluster.local.", dnsmessage.TypeAAAA); m.RCode != dnsmessage.RCodeSuccess || len(m.Answers) != 0 {
		t.Errorf("AAAA of an IPv4 name: %+v, want an empty answer", m)
	}
	if m := ask("nothing.default.svc.cluster.local.", dnsmessage.TypeA); m.RCode != dnsmessage.RCodeNameError {
		t.Errorf("a missing Service: %+v, want NXDOMAIN", m.Header)
	}
	if m := ask("example.com.", dnsmessage.TypeA); m.RCode != dnsmessage.RCodeNameError {
		t.Errorf("a name outside the cluster: %+v, want NXDOMAIN", m.Header)
	}
}
