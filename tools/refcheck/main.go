// refcheck prints, for each argument, how the Go parsers the fleet's consumers use read it:
// "ok" or "error: <its message>".
//
//	go run ./refcheck image REF...  github.com/distribution/reference v0.6.0 Parse, the
//	                                image grammar containerd and the kubelet follow
//	go run ./refcheck url URL...    net/url Parse, as containerd v2.3.4 reads a mirror of
//	                                hosts.toml (core/remotes/docker/config/hosts.go)
//
// The real tier runs it beside the project's own checks (components/model/fieldtypes.py)
// on the same cases, so the two cannot disagree unseen. Run inside the tools module.
package main

import (
	// The digest algorithms a runtime links in (containerd imports both); go-digest
	// v1.0.0 takes an algorithm only when its hash is available (Algorithm.Available).
	_ "crypto/sha256"
	_ "crypto/sha512"
	"fmt"
	"net/url"
	"os"

	"github.com/distribution/reference"
)

func main() {
	if len(os.Args) < 2 || (os.Args[1] != "image" && os.Args[1] != "url") {
		fmt.Fprintln(os.Stderr, "usage: refcheck image|url ARG...")
		os.Exit(2)
	}
	for _, arg := range os.Args[2:] {
		var err error
		if os.Args[1] == "image" {
			_, err = reference.Parse(arg)
		} else {
			_, err = url.Parse(arg)
		}
		if err != nil {
			fmt.Printf("error: %v\n", err)
		} else {
			fmt.Println("ok")
		}
	}
}
