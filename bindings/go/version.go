package kvcache

import "kvcache/kvc"

// Version of the headers this binding was generated from.
const (
	HeaderVersionMajor = kvc.KVC_VERSION_MAJOR
	HeaderVersionMinor = kvc.KVC_VERSION_MINOR
	HeaderVersionPatch = kvc.KVC_VERSION_PATCH
	HeaderVersion      = kvc.KVC_VERSION_STRING
)

// Feature bits of Features.
const (
	// FeatureCUDACompiled: the library was built with the CUDA backend.
	FeatureCUDACompiled uint64 = 1 << 0
	// FeatureCUDADevice: the CUDA backend is built and a device is usable.
	FeatureCUDADevice uint64 = 1 << 1
	// FeatureRedis: the library was built with hiredis (a remote tier can
	// be configured: Config.SetRemoteCache).
	FeatureRedis uint64 = 1 << 2
)

// Version of the running library, MAJOR*10000 + MINOR*100 + PATCH
// (kvc_version).
func Version() uint32 { return kvc.Kvc_version() }

// VersionString of the running library, "MAJOR.MINOR.PATCH"
// (kvc_version_string).
func VersionString() string { return kvc.Kvc_version_string() }

// ABIVersion of the running library, the N of libkvcache.so.N
// (kvc_abi_version).
func ABIVersion() uint32 { return kvc.Kvc_abi_version() }

// Features of the running library and machine, FeatureCUDA* bits
// (kvc_features). FeatureCUDADevice probes the driver on every call.
func Features() uint64 { return kvc.Kvc_features() }
