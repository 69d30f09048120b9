package http1

// Error is a parse error: the HTTP status the proxy answers with and a short
// reason for logs. Parse functions return pointers to fixed values, never a
// new Error, so failing costs no allocation and errors compare with ==.
//
// Errors from Request.Parse carry the status a client should get (400, 413,
// 414, 431, 501, 505). Errors from Response.Parse all carry 502: a server
// that sends a malformed head is a bad gateway whatever the defect. Errors
// from a Chunked decoder carry 400 (or 413 over MaxBody, 431 for trailers);
// on a response body the head has usually been forwarded already, so the
// proxy can only abort the connection.
type Error struct {
	Status int
	Reason string
}

func (e *Error) Error() string { return e.Reason }

type errCode uint8

const (
	eBareLF errCode = iota
	eBareCR
	eLeadingWS
	eMethod
	eMethodLong
	eRequestLine
	eTarget
	eTargetForm
	eAuthority
	eVersion
	eVersionUnsupported
	eRequestLineLong
	eHeadTooLarge
	eTooManyHeaders
	eFieldName
	eSpaceBeforeColon
	eNoColon
	eObsFold
	eFieldValue
	eHostMissing
	eHostDup
	eHostInvalid
	eHostMismatch
	eCL
	eCLDup
	eTEFinal
	eTEDup
	eTEUnknown
	eTEInvalid
	eTEHTTP10
	eCLandTE
	eStatusLine
	eStatusCode
	eReason
	eBodyTooLarge
	eConnOptions
	numErrCodes
)

var errText = [numErrCodes]struct {
	status int
	reason string
}{
	eBareLF:             {400, "line ends with a bare LF"},
	eBareCR:             {400, "bare CR in head"},
	eLeadingWS:          {400, "whitespace before the first header field"},
	eMethod:             {400, "method is not a token"},
	eMethodLong:         {501, "method too long"},
	eRequestLine:        {400, "malformed request line"},
	eTarget:             {400, "invalid character in request-target"},
	eTargetForm:         {400, "request-target form not allowed for this method"},
	eAuthority:          {400, "invalid authority in request-target"},
	eVersion:            {400, "malformed HTTP version"},
	eVersionUnsupported: {505, "HTTP version not supported"},
	eRequestLineLong:    {414, "request line too long"},
	eHeadTooLarge:       {431, "head too large"},
	eTooManyHeaders:     {431, "too many header fields"},
	eFieldName:          {400, "header field name is not a token"},
	eSpaceBeforeColon:   {400, "whitespace between field name and colon"},
	eNoColon:            {400, "header line without colon"},
	eObsFold:            {400, "obsolete line folding"},
	eFieldValue:         {400, "invalid character in field value"},
	eHostMissing:        {400, "missing Host"},
	eHostDup:            {400, "duplicate Host"},
	eHostInvalid:        {400, "invalid Host"},
	eHostMismatch:       {400, "Host differs from the request-target authority"},
	eCL:                 {400, "invalid Content-Length"},
	eCLDup:              {400, "Content-Length list or repeated field"},
	eTEFinal:            {400, "chunked is not the final transfer coding"},
	eTEDup:              {400, "chunked applied more than once"},
	eTEUnknown:          {501, "unsupported transfer coding"},
	eTEInvalid:          {400, "invalid Transfer-Encoding"},
	eTEHTTP10:           {400, "Transfer-Encoding in an HTTP/1.0 message"},
	eCLandTE:            {400, "both Content-Length and Transfer-Encoding"},
	eStatusLine:         {502, "malformed status line"},
	eStatusCode:         {502, "invalid status code"},
	eReason:             {502, "invalid character in reason phrase"},
	eBodyTooLarge:       {413, "body too large"},
	eConnOptions:        {400, "too many Connection options"},
}

// requestErrors and responseErrors are filled once at package initialisation
// and never written again; parsers return pointers into them.
var requestErrors, responseErrors = buildErrors()

func buildErrors() (req, resp [numErrCodes]Error) {
	for i, t := range errText {
		req[i] = Error{Status: t.status, Reason: t.reason}
		resp[i] = Error{Status: 502, Reason: "response: " + t.reason}
	}
	return req, resp
}

// Exported errors, for callers and tests that want to match a specific
// defect with errors.Is or ==.
var (
	ErrBareLF          = &requestErrors[eBareLF]
	ErrRequestLineLong = &requestErrors[eRequestLineLong]
	ErrHeadTooLarge    = &requestErrors[eHeadTooLarge]
	ErrTooManyHeaders  = &requestErrors[eTooManyHeaders]
	ErrCLandTE         = &requestErrors[eCLandTE]
	ErrBodyTooLarge    = &requestErrors[eBodyTooLarge]
)
