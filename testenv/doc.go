// Package testenv starts local TigerBeetle servers for tests and tools, and picks the engine tests run on.
package testenv
