// Package recipes provides ready limiters kept in TigerBeetle: request rate, bandwidth and money per window.
package recipes
