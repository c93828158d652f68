// Command check decodes Kubernetes manifests strictly: every object of every YAML file given
// must be of a known kind and decode into its Go API type with no unknown or duplicate field, and
// the objects of one file must agree with each other (see Consistent).
// Kubernetes' own kinds decode into k8s.io/api, the Prometheus Operator's ServiceMonitor into its
// API module, KEDA's ScaledObject into KEDA's. KServe's Go module is not served by the Go module
// proxy, so KServe's kinds are checked against the OpenAPI models that KServe generates for its
// Python SDK (the `kserve` wheel, given with -kserve-wheel): each KServe field must be one those
// models name, with the JSON type they give, and each Kubernetes type inside (a container, a
// volume) decodes strictly into k8s.io/api.
//
//	go run . -kserve-wheel kserve-0.21.0-py3-none-any.whl file.yaml ...
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"sigs.k8s.io/yaml"
)

func main() {
	wheel := flag.String("kserve-wheel", "", "the kserve Python wheel whose OpenAPI models KServe objects are checked against")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: check [-kserve-wheel FILE] FILE.yaml ... (- for standard input)")
		os.Exit(2)
	}
	var kserve *Models
	if *wheel != "" {
		var err error
		if kserve, err = ReadWheel(*wheel); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	failed := 0
	for _, file := range flag.Args() {
		data, err := read(file)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		var objects []any
		for i, doc := range documents(data) {
			kind, object, err := Check(doc, kserve)
			if err != nil {
				failed++
				fmt.Printf("FAIL %s#%d %s: %v\n", file, i+1, kind, err)
				continue
			}
			objects = append(objects, object)
			fmt.Printf("ok %s#%d %s\n", file, i+1, kind)
		}
		for _, err := range Consistent(objects) {
			failed++
			fmt.Printf("FAIL %s: %v\n", file, err)
		}
	}
	if failed > 0 {
		fmt.Printf("%d object(s) failed\n", failed)
		os.Exit(1)
	}
}

func read(file string) ([]byte, error) {
	if file == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(file)
}

// documents splits a YAML stream on its `---` lines, leaving out documents that hold only
// comments or nothing.
func documents(data []byte) [][]byte {
	var docs [][]byte
	for _, part := range bytes.Split(append([]byte("\n"), data...), []byte("\n---")) {
		if i := bytes.IndexByte(part, '\n'); i >= 0 {
			part = part[i+1:] // the rest of the `---` line
		}
		empty := true
		for _, line := range strings.Split(string(part), "\n") {
			if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
				empty = false
				break
			}
		}
		if !empty {
			docs = append(docs, part)
		}
	}
	return docs
}

// Check decodes one object strictly and returns its "apiVersion/kind name" and the object (nil
// for a KServe object, which has no Go type here).
func Check(doc []byte, kserve *Models) (string, any, error) {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return "?", nil, fmt.Errorf("not YAML: %w", err)
	}
	label := fmt.Sprintf("%s/%s %s", head.APIVersion, head.Kind, head.Metadata.Name)
	if head.Metadata.Name == "" {
		return label, nil, errors.New("no metadata.name")
	}
	gvk := head.APIVersion + "/" + head.Kind
	if root, ok := kserveKinds[gvk]; ok {
		if kserve == nil {
			return label, nil, errors.New("a KServe object, and no -kserve-wheel to check it against")
		}
		return label, nil, kserve.CheckObject(doc, root)
	}
	newObject, ok := kinds[gvk]
	if !ok {
		return label, nil, fmt.Errorf("unknown kind %s (the checker knows %s)", gvk, strings.Join(known(), ", "))
	}
	object := newObject()
	return label, object, yaml.UnmarshalStrict(doc, object)
}
