package network

import (
	"errors"

	"golang.org/x/net/dns/dnsmessage"
)

// dnsTTL is the TTL of the answers, CoreDNS's kubernetes plugin's default.
const dnsTTL = 5

// AnswerDNS answers a DNS query in wire format (RFC 1035) as the cluster DNS server: A records
// for the names Query finds (see there), an empty answer for other types of a name that exists,
// NXDOMAIN for one that does not. It serves processes that resolve names over a socket (host
// binaries, package hostproc); in-process programs ask Query.
func (n *Network) AnswerDNS(query []byte) ([]byte, error) {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil, err
	}
	q, err := p.Question()
	if err != nil {
		return nil, err
	}
	if h.Response {
		return nil, errors.New("a response, not a query")
	}
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired, RecursionAvailable: true}
	addrs, found := n.lookup(q.Name.String())
	if !found {
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil, err
	}
	if err := b.Question(q); err != nil {
		return nil, err
	}
	if err := b.StartAnswers(); err != nil {
		return nil, err
	}
	if q.Type == dnsmessage.TypeA || q.Type == dnsmessage.TypeALL {
		for _, a := range addrs {
			if !a.Is4() {
				continue
			}
			rr := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: dnsTTL}
			if err := b.AResource(rr, dnsmessage.AResource{A: a.As4()}); err != nil {
				return nil, err
			}
		}
	}
	return b.Finish()
}
