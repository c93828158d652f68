package main

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// Model is one OpenAPI model of KServe's Python SDK: its fields by JSON name, with their types
// as the SDK writes them (`str`, `list[V1Container]`, `dict(str, str)`, `V1beta1ModelSpec`, ...),
// and the fields it requires.
type Model struct {
	Fields   map[string]string
	Required map[string]bool
}

// Models are the OpenAPI models of a kserve wheel, by name (`V1beta1InferenceService`).
type Models struct {
	byName map[string]*Model
	source string
}

var (
	classRe     = regexp.MustCompile(`(?m)^class (\w+)\(object\):`)
	typesRe     = regexp.MustCompile(`(?s)openapi_types = \{(.*?)\}`)
	attributeRe = regexp.MustCompile(`(?s)attribute_map = \{(.*?)\}`)
	pairRe      = regexp.MustCompile(`'([^']+)': '([^']+)'`)
	requiredRe  = regexp.MustCompile("Invalid value for `(\\w+)`, must not be `None`")
)

// ReadWheel reads the models of kserve/models/*.py in a kserve wheel.
func ReadWheel(path string) (*Models, error) {
	archive, err := zip.OpenReader(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read the kserve wheel: %w", err)
	}
	defer archive.Close()
	models := &Models{byName: map[string]*Model{}, source: path}
	for _, file := range archive.File {
		if !strings.HasPrefix(file.Name, "kserve/models/v1") || !strings.HasSuffix(file.Name, ".py") {
			continue
		}
		r, err := file.Open()
		if err != nil {
			return nil, err
		}
		text, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			return nil, err
		}
		class, model, err := parseModel(string(text))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file.Name, err)
		}
		if class != "" {
			models.byName[class] = model
		}
	}
	if len(models.byName) == 0 {
		return nil, fmt.Errorf("%s holds no kserve/models/v1*.py", path)
	}
	return models, nil
}

func parseModel(text string) (string, *Model, error) {
	class := classRe.FindStringSubmatch(text)
	types := typesRe.FindStringSubmatch(text)
	attributes := attributeRe.FindStringSubmatch(text)
	if class == nil || types == nil || attributes == nil {
		return "", nil, nil // not a model (an __init__, a helper)
	}
	typeOf := map[string]string{}
	for _, pair := range pairRe.FindAllStringSubmatch(types[1], -1) {
		typeOf[pair[1]] = pair[2]
	}
	model := &Model{Fields: map[string]string{}, Required: map[string]bool{}}
	jsonName := map[string]string{}
	for _, pair := range pairRe.FindAllStringSubmatch(attributes[1], -1) {
		typ, ok := typeOf[pair[1]]
		if !ok {
			return "", nil, fmt.Errorf("attribute %s has no type", pair[1])
		}
		model.Fields[pair[2]] = typ
		jsonName[pair[1]] = pair[2]
	}
	for _, m := range requiredRe.FindAllStringSubmatch(text, -1) {
		if name, ok := jsonName[m[1]]; ok {
			model.Required[name] = true
		}
	}
	return class[1], model, nil
}

// CheckObject checks one YAML object against the model named root.
func (m *Models) CheckObject(doc []byte, root string) error {
	data, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	decoder := json.NewDecoder(bytes.NewReader(data))
	decoder.UseNumber()
	var value any
	if err := decoder.Decode(&value); err != nil {
		return err
	}
	return m.check(value, root, "")
}

func (m *Models) check(value any, typ, path string) error {
	where := path
	if where == "" {
		where = "(root)"
	}
	switch {
	case strings.HasPrefix(typ, "list[") && strings.HasSuffix(typ, "]"):
		items, ok := value.([]any)
		if !ok {
			return fmt.Errorf("%s: expected a list (%s)", where, typ)
		}
		for i, item := range items {
			if err := m.check(item, typ[5:len(typ)-1], fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		return nil
	case strings.HasPrefix(typ, "dict(str, ") && strings.HasSuffix(typ, ")"):
		entries, ok := value.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: expected a map (%s)", where, typ)
		}
		for _, key := range sortedKeys(entries) {
			if err := m.check(entries[key], typ[10:len(typ)-1], path+"."+key); err != nil {
				return err
			}
		}
		return nil
	}
	switch typ {
	case "object":
		return nil
	case "str", "date", "datetime":
		if _, ok := value.(string); !ok {
			return fmt.Errorf("%s: expected a string, not %v", where, value)
		}
		return nil
	case "bool":
		if _, ok := value.(bool); !ok {
			return fmt.Errorf("%s: expected true or false, not %v", where, value)
		}
		return nil
	case "int", "float":
		n, ok := value.(json.Number)
		if !ok {
			return fmt.Errorf("%s: expected a number, not %v", where, value)
		}
		if _, err := n.Int64(); typ == "int" && err != nil {
			return fmt.Errorf("%s: expected a whole number, not %v", where, value)
		}
		return nil
	}
	if model, ok := m.byName[typ]; ok {
		fields, ok := value.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: expected an object (%s)", where, typ)
		}
		for _, key := range sortedKeys(fields) {
			fieldType, ok := model.Fields[key]
			if !ok {
				return fmt.Errorf("%s: unknown field %q of %s (it has %s)", where, key, typ, strings.Join(sortedKeys(model.Fields), ", "))
			}
			if err := m.check(fields[key], fieldType, path+"."+key); err != nil {
				return err
			}
		}
		for _, key := range sortedKeys(model.Required) {
			if _, ok := fields[key]; !ok {
				return fmt.Errorf("%s: %s requires the field %q", where, typ, key)
			}
		}
		return nil
	}
	if newObject, ok := kubernetesTypes[typ]; ok {
		data, err := json.Marshal(value)
		if err != nil {
			return err
		}
		if err := yaml.UnmarshalStrict(data, newObject()); err != nil {
			return fmt.Errorf("%s (%s): %w", where, typ, err)
		}
		return nil
	}
	return fmt.Errorf("%s: the checker knows no type %s (add it to kubernetesTypes)", where, typ)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
