// imageref prints, for each argument, how github.com/distribution/reference v0.6.0 (the
// parser containerd and the kubelet's image handling follow) reads it as an image
// reference: "ok" or "error: <its message>". The real tier runs it beside the project's
// own check (components/model/fieldtypes.py, Image) on the same cases, so the two cannot
// disagree unseen. Run inside the tools module: `go run ./imageref REF...`.
package main

import (
	// The digest algorithms a runtime links in (containerd imports both); go-digest
	// v1.0.0 takes an algorithm only when its hash is available (Algorithm.Available).
	_ "crypto/sha256"
	_ "crypto/sha512"
	"fmt"
	"os"

	"github.com/distribution/reference"
)

func main() {
	for _, arg := range os.Args[1:] {
		if _, err := reference.Parse(arg); err != nil {
			fmt.Printf("error: %v\n", err)
		} else {
			fmt.Println("ok")
		}
	}
}
