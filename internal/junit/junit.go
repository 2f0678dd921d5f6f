// Package junit owns the JUnit XML that restartbed's reports write (restartbed run --junit,
// restartbed explore --junit): the elements CI systems read, and their encoding. It knows
// nothing of scenarios or schedules; its callers fill the elements.
package junit

import (
	"encoding/xml"
	"io"
)

// Suites is a document of several test suites.
type Suites struct {
	XMLName xml.Name `xml:"testsuites"`
	Suites  []Suite  `xml:"testsuite"`
}

// Suite is one test suite and its counts.
type Suite struct {
	XMLName  xml.Name `xml:"testsuite"`
	Name     string   `xml:"name,attr"`
	Tests    int      `xml:"tests,attr"`
	Failures int      `xml:"failures,attr"`
	Errors   int      `xml:"errors,attr"`
	Skipped  int      `xml:"skipped,attr"`
	Time     float64  `xml:"time,attr"`
	File     string   `xml:"file,attr,omitempty"`
	// Error is an error of the whole suite (its cluster did not start, say).
	Error *Message `xml:"error,omitempty"`
	Cases []Case   `xml:"testcase"`
}

// Case is one test case: passed, or with a failure, an error or a skip.
type Case struct {
	Name      string   `xml:"name,attr"`
	Classname string   `xml:"classname,attr"`
	Time      float64  `xml:"time,attr"`
	Failure   *Message `xml:"failure,omitempty"`
	Error     *Message `xml:"error,omitempty"`
	Skipped   *Message `xml:"skipped,omitempty"`
}

// Message is a failure's, error's or skip's message and text.
type Message struct {
	Message string `xml:"message,attr,omitempty"`
	Text    string `xml:",chardata"`
}

// Write writes doc (Suites or Suite) as an indented XML document.
func Write(w io.Writer, doc any) error {
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}
