package main

import (
	"sort"

	keda "github.com/kedacore/keda/v2/apis/keda/v1alpha1"
	monitoring "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// kinds maps "apiVersion/kind" to a new object of its Go API type.
var kinds = map[string]func() any{
	"v1/ConfigMap":                            func() any { return &corev1.ConfigMap{} },
	"v1/PersistentVolumeClaim":                func() any { return &corev1.PersistentVolumeClaim{} },
	"v1/Secret":                               func() any { return &corev1.Secret{} },
	"v1/Service":                              func() any { return &corev1.Service{} },
	"v1/ServiceAccount":                       func() any { return &corev1.ServiceAccount{} },
	"apps/v1/Deployment":                      func() any { return &appsv1.Deployment{} },
	"autoscaling/v2/HorizontalPodAutoscaler":  func() any { return &autoscalingv2.HorizontalPodAutoscaler{} },
	"policy/v1/PodDisruptionBudget":           func() any { return &policyv1.PodDisruptionBudget{} },
	"monitoring.coreos.com/v1/ServiceMonitor": func() any { return &monitoring.ServiceMonitor{} },
	"keda.sh/v1alpha1/ScaledObject":           func() any { return &keda.ScaledObject{} },
}

// kserveKinds maps KServe's "apiVersion/kind" to the name of its OpenAPI model.
var kserveKinds = map[string]string{
	"serving.kserve.io/v1alpha1/ClusterServingRuntime": "V1alpha1ClusterServingRuntime",
	"serving.kserve.io/v1alpha1/ServingRuntime":        "V1alpha1ServingRuntime",
	"serving.kserve.io/v1beta1/InferenceService":       "V1beta1InferenceService",
}

// kubernetesTypes maps the Kubernetes OpenAPI model names that KServe's models refer to onto
// their Go API types, which those parts of a KServe object decode into strictly.
var kubernetesTypes = map[string]func() any{
	"V1ObjectMeta":               func() any { return &metav1.ObjectMeta{} },
	"V1Container":                func() any { return &corev1.Container{} },
	"V1Volume":                   func() any { return &corev1.Volume{} },
	"V1Affinity":                 func() any { return &corev1.Affinity{} },
	"V1Toleration":               func() any { return &corev1.Toleration{} },
	"V1LocalObjectReference":     func() any { return &corev1.LocalObjectReference{} },
	"V1PodResourceClaim":         func() any { return &corev1.PodResourceClaim{} },
	"V1ResourceRequirements":     func() any { return &corev1.ResourceRequirements{} },
	"V1EnvVar":                   func() any { return &corev1.EnvVar{} },
	"V1EnvFromSource":            func() any { return &corev1.EnvFromSource{} },
	"V1ContainerPort":            func() any { return &corev1.ContainerPort{} },
	"V1Probe":                    func() any { return &corev1.Probe{} },
	"V1Lifecycle":                func() any { return &corev1.Lifecycle{} },
	"V1SecurityContext":          func() any { return &corev1.SecurityContext{} },
	"V1PodSecurityContext":       func() any { return &corev1.PodSecurityContext{} },
	"V1VolumeMount":              func() any { return &corev1.VolumeMount{} },
	"V1VolumeDevice":             func() any { return &corev1.VolumeDevice{} },
	"V1TopologySpreadConstraint": func() any { return &corev1.TopologySpreadConstraint{} },
	"V1PodDNSConfig":             func() any { return &corev1.PodDNSConfig{} },
	"V1HostAlias":                func() any { return &corev1.HostAlias{} },
	"V1PodReadinessGate":         func() any { return &corev1.PodReadinessGate{} },
	"V1EphemeralContainer":       func() any { return &corev1.EphemeralContainer{} },
	"V1PodOS":                    func() any { return &corev1.PodOS{} },
	"V1PodSchedulingGate":        func() any { return &corev1.PodSchedulingGate{} },
	"V1ResourceClaim":            func() any { return &corev1.ResourceClaim{} },
	"V1ContainerResizePolicy":    func() any { return &corev1.ContainerResizePolicy{} },
	"V1Time":                     func() any { return &metav1.Time{} },
	"V1Condition":                func() any { return &metav1.Condition{} },
	"V1LabelSelector":            func() any { return &metav1.LabelSelector{} },
}

func known() []string {
	var names []string
	for k := range kinds {
		names = append(names, k)
	}
	for k := range kserveKinds {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}
