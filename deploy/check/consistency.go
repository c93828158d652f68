package main

import (
	"fmt"

	keda "github.com/kedacore/keda/v2/apis/keda/v1alpha1"
	monitoring "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Consistent checks what the objects of one stream say of each other: a Deployment's selector
// selects its pods and its probes and mounts name its ports and volumes; Services, budgets and
// ServiceMonitors select what the stream deploys, by labels and port names; autoscalers scale a
// Deployment of the stream. Streams without a Deployment are left alone.
func Consistent(objects []any) []error {
	var deployments []*appsv1.Deployment
	var services []*corev1.Service
	for _, o := range objects {
		switch o := o.(type) {
		case *appsv1.Deployment:
			deployments = append(deployments, o)
		case *corev1.Service:
			services = append(services, o)
		}
	}
	if len(deployments) == 0 {
		return nil
	}
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	for _, d := range deployments {
		errs = append(errs, deploymentErrors(d)...)
	}
	// The Deployment whose pods a selector selects, if any.
	selecting := func(selector labels.Selector) *appsv1.Deployment {
		for _, d := range deployments {
			if !selector.Empty() && selector.Matches(labels.Set(d.Spec.Template.Labels)) {
				return d
			}
		}
		return nil
	}
	deploymentNamed := func(kind, name string) bool {
		for _, d := range deployments {
			if (kind == "" || kind == "Deployment") && d.Name == name {
				return true
			}
		}
		return false
	}
	for _, o := range objects {
		switch o := o.(type) {
		case *corev1.Service:
			d := selecting(labels.SelectorFromSet(o.Spec.Selector))
			if d == nil {
				fail("Service %s selects no pod of the Deployments here", o.Name)
				continue
			}
			ports := portNames(d)
			for _, p := range o.Spec.Ports {
				if p.TargetPort.Type == intstr.String && !ports[p.TargetPort.StrVal] {
					fail("Service %s: port %s targets %q, which no container of Deployment %s names", o.Name, p.Name, p.TargetPort.StrVal, d.Name)
				}
			}
		case *policyv1.PodDisruptionBudget:
			if selector, err := metav1.LabelSelectorAsSelector(o.Spec.Selector); err != nil || selecting(selector) == nil {
				fail("PodDisruptionBudget %s selects no pod of the Deployments here", o.Name)
			}
		case *autoscalingv2.HorizontalPodAutoscaler:
			if !deploymentNamed(o.Spec.ScaleTargetRef.Kind, o.Spec.ScaleTargetRef.Name) {
				fail("HorizontalPodAutoscaler %s scales %s %s, not a Deployment here", o.Name, o.Spec.ScaleTargetRef.Kind, o.Spec.ScaleTargetRef.Name)
			}
		case *keda.ScaledObject:
			if o.Spec.ScaleTargetRef == nil || !deploymentNamed(o.Spec.ScaleTargetRef.Kind, o.Spec.ScaleTargetRef.Name) {
				fail("ScaledObject %s scales no Deployment here", o.Name)
			}
		case *monitoring.ServiceMonitor:
			errs = append(errs, serviceMonitorErrors(o, services)...)
		}
	}
	return errs
}

func deploymentErrors(d *appsv1.Deployment) []error {
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("Deployment %s: "+format, append([]any{d.Name}, args...)...))
	}
	if selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector); err != nil || selector.Empty() || !selector.Matches(labels.Set(d.Spec.Template.Labels)) {
		fail("its selector does not select its own pods")
	}
	volumes := map[string]bool{}
	for _, v := range d.Spec.Template.Spec.Volumes {
		volumes[v.Name] = true
	}
	all := append(append([]corev1.Container{}, d.Spec.Template.Spec.InitContainers...), d.Spec.Template.Spec.Containers...)
	for _, c := range all {
		ports := map[string]bool{}
		for _, p := range c.Ports {
			ports[p.Name] = true
		}
		for kind, probe := range map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
			if probe != nil && probe.HTTPGet != nil && probe.HTTPGet.Port.Type == intstr.String && !ports[probe.HTTPGet.Port.StrVal] {
				fail("container %s: the %s probe's port %q is not one of its ports", c.Name, kind, probe.HTTPGet.Port.StrVal)
			}
		}
		for _, m := range c.VolumeMounts {
			if !volumes[m.Name] {
				fail("container %s mounts %q, which is not a volume of the pod", c.Name, m.Name)
			}
		}
	}
	return errs
}

func serviceMonitorErrors(m *monitoring.ServiceMonitor, services []*corev1.Service) []error {
	selector, err := metav1.LabelSelectorAsSelector(&m.Spec.Selector)
	if err != nil {
		return []error{fmt.Errorf("ServiceMonitor %s: %w", m.Name, err)}
	}
	for _, s := range services {
		if selector.Empty() || !selector.Matches(labels.Set(s.Labels)) {
			continue
		}
		names := map[string]bool{}
		for _, p := range s.Spec.Ports {
			names[p.Name] = true
		}
		for _, e := range m.Spec.Endpoints {
			if e.Port != "" && !names[e.Port] {
				return []error{fmt.Errorf("ServiceMonitor %s scrapes port %q, which Service %s does not name", m.Name, e.Port, s.Name)}
			}
		}
		return nil
	}
	return []error{fmt.Errorf("ServiceMonitor %s selects no Service here", m.Name)}
}

// portNames are the names of the container ports of a Deployment's pods.
func portNames(d *appsv1.Deployment) map[string]bool {
	names := map[string]bool{}
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, p := range c.Ports {
			names[p.Name] = true
		}
	}
	return names
}
