// Package apitest holds the API to its OpenAPI document in tests: every
// answer a test sees on a documented route must match what the document
// says of that route and status (an error answer, the Error schema).
// Only tests import it, so kin-openapi stays out of the berth binary.
package apitest

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/berth-sh/berth/http/apidoc"
)

// document is the loaded, validated OpenAPI document and its router.
var document = sync.OnceValues(func() (*openapi3.T, routers.Router) {
	doc, err := openapi3.NewLoader().LoadFromData(apidoc.JSON())
	if err != nil {
		panic("the OpenAPI document does not load: " + err.Error())
	}
	if err := doc.Validate(context.Background()); err != nil {
		panic("the OpenAPI document is not valid: " + err.Error())
	}
	r, err := legacy.NewRouter(doc)
	if err != nil {
		panic("the OpenAPI document's routes: " + err.Error())
	}
	return doc, r
})

// Document returns the API's OpenAPI document, loaded and validated.
func Document() *openapi3.T {
	doc, _ := document()
	return doc
}

// Check fails tb when an answer to req on a route the document describes
// does not match it. Event streams and empty answers are not checked.
func Check(tb testing.TB, req *http.Request, status int, header http.Header, body []byte) {
	tb.Helper()
	if len(body) == 0 || !strings.HasPrefix(header.Get("Content-Type"), "application/json") {
		return
	}
	_, router := document()
	// The document's server is 127.0.0.1:7380: route the request as if sent there.
	u := *req.URL
	u.Scheme, u.Host = "http", "127.0.0.1:7380"
	r := req.Clone(context.Background())
	r.URL = &u
	r.Body = io.NopCloser(bytes.NewReader(nil))
	route, params, err := router.FindRoute(r)
	if err != nil {
		// Not a documented route (the UI, a 404 path, a wrong method).
		return
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route,
			QueryParams: url.Values{}},
		Status:  status,
		Header:  header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	in.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		tb.Errorf("%s %s answered %d, which the OpenAPI document does not allow: %v\nbody: %.2000s", req.Method, req.URL.Path, status, err, body)
	}
}
